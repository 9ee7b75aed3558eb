// agentmem from Node.js through SQL alone: the `pg` driver, no embedding model (messages are
// stored with embedding => null; agentmem's worker embeds them).
//
//   DATABASE_URL=postgresql://app_login@host/db node example.js
//
// The login must be an application role (agentmem.grant_app_role, or
// `agentmem migrate --grant-app-role`) granted the tenant example-node (tenants are bound to logins):
//   select agentmem.grant_tenant(role_name => 'app_login', tenant_id => 'example-node');
// Every unit of work is one transaction that
// starts with set_tenant(..., local => true), as a pooled application must: the
// tenant ends with the transaction, so a pooled connection never carries one
// request's tenant into the next. Each step checks what it prints; any surprise
// exits non-zero.
'use strict';

const { Pool } = require('pg');

const TENANT = 'example-node';
const MODEL = 'nomic-embed-text';
const USER = `alice-${process.pid}-${Date.now()}`; // a fresh user each run

function check(condition, what) {
  if (!condition) {
    throw new Error(`unexpected: ${what}`);
  }
}

// Messages are stored with embedding => null: this program has no embedding model. Each is
// found by words at once, and agentmem queues an embedding job for it in the same transaction;
// `agentmem worker` (the deployment runs one) embeds it, and then it is found by meaning too.
//
// A cache lookup still takes the question's embedding: here every question gets the same unit
// vector of the model's dimension, so only the exact path means anything. An application with
// a model of its own passes real vectors there.
function placeholderEmbedding(dimension) {
  return '[' + Array.from({ length: dimension }, (_, i) => (i === 0 ? 1 : 0)).join(',') + ']';
}

// One transaction bound to one tenant: BEGIN, set_tenant(local => true), work, COMMIT.
async function withTenant(pool, tenant, work) {
  const client = await pool.connect();
  try {
    await client.query('begin');
    await client.query('select agentmem.set_tenant(tenant_id => $1, local => true)', [tenant]);
    const result = await work(client);
    await client.query('commit');
    return result;
  } catch (err) {
    await client.query('rollback');
    throw err;
  } finally {
    client.release();
  }
}

async function main() {
  const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 2 });
  try {
    const dimension = await withTenant(pool, TENANT, async (db) => {
      const r = await db.query('select dimension from agentmem.get_model(model => $1)', [MODEL]);
      return r.rows[0].dimension;
    });
    console.log(`model ${MODEL}: ${dimension} dimensions`);

    const conversation = await withTenant(pool, TENANT, async (db) => {
      const r = await db.query(
        'select agentmem.start_conversation(user_id => $1, title => $2) as id', [USER, 'Billing']);
      const id = r.rows[0].id;
      for (const [role, content] of [
        ['user', 'Invoice INV-2291 was charged twice'],
        ['assistant', 'The duplicate charge on INV-2291 is refunded within 5 days.'],
      ]) {
        await db.query(
          'select * from agentmem.store_message(conversation_id => $1, role => $2, content => $3, ' +
          'embedding => null, model => $4)', [id, role, content, MODEL]);
      }
      return id;
    });
    console.log(`conversation ${conversation}: 2 messages stored without a vector (queued for the worker)`);

    const hits = await withTenant(pool, TENANT, async (db) => (await db.query(
      'select message_index, content, text_rank from agentmem.search_messages(' +
      'user_id => $1, query_text => $2, k => 5)', [USER, 'charged twice'])).rows);
    check(hits.length >= 1 && hits[0].content === 'Invoice INV-2291 was charged twice',
      `search by words found ${JSON.stringify(hits)}`);
    console.log(`search 'charged twice', at once: [${hits[0].message_index}] ${hits[0].content}`);

    const question = 'How long does a refund of a duplicate charge take?';
    const answer = 'A duplicate charge is refunded within 5 days.';
    const cached = await withTenant(pool, TENANT, async (db) => {
      const stored = (await db.query(
        'select stored, reason from agentmem.cache_store(question => $1, question_embedding => $2, ' +
        'answer => $3, source_ids => $4, model => $5)',
        [question, placeholderEmbedding(dimension), answer, ['docs/refunds.md'], MODEL])).rows[0];
      check(stored.stored === true, `cache_store: ${JSON.stringify(stored)}`);
      return (await db.query(
        'select hit, kind, answer from agentmem.cache_lookup(question => $1, question_embedding => $2, ' +
        'model => $3)', [question.toLowerCase(), placeholderEmbedding(dimension), MODEL])).rows[0];
    });
    check(cached.hit === true && cached.kind === 'exact' && cached.answer === answer,
      `cache_lookup: ${JSON.stringify(cached)}`);
    console.log(`cached answer: hit (${cached.kind}): ${cached.answer}`);

    // A transaction that never set a tenant: agentmem refuses with SQLSTATE AM001, never
    // falls back to every tenant.
    const client = await pool.connect();
    let sqlstate = null;
    try {
      await client.query('select agentmem.start_conversation(user_id => $1)', [USER]);
    } catch (err) {
      sqlstate = err.code;
      console.log(`without a tenant: SQLSTATE ${err.code}: ${err.message}`);
    } finally {
      client.release();
    }
    check(sqlstate === 'AM001', `SQLSTATE ${sqlstate} without a tenant, expected AM001`);

    const receipt = await withTenant(pool, TENANT, async (db) => (await db.query(
      'select rows_removed, erased_at from agentmem.forget_user(user_id => $1)', [USER])).rows[0]);
    check(receipt.rows_removed.messages === 2 && receipt.rows_removed.conversations === 1,
      `receipt ${JSON.stringify(receipt)}`);
    console.log(`forget_user: receipt ${JSON.stringify(receipt.rows_removed)}`);
    console.log('node example: OK');
  } finally {
    await pool.end();
  }
}

main().catch((err) => {
  console.error(`node example FAILED: ${err.code ? `SQLSTATE ${err.code}: ` : ''}${err.message}`);
  process.exit(1);
});

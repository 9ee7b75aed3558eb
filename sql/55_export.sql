-- Export and import of a user's (or a tenant's) memory as JSON Lines: one JSON
-- object per row, a header first and an end row last. The format (format_version 1):
--   {"type": "header", "format": "agentmem-export", "format_version": 1, "scope": "user",
--    "agentmem_version": ..., "schema_version": ..., "exported_at": ..., "tenant_id": ...,
--    "user_id": ..., "models": [{"model": ..., "dimension": ...}, ...]}
--   {"type": "conversation", <every column of agentmem.conversations>}
--   {"type": "message", <every column of agentmem.messages>, "embeddings": [{"model", "embedding", "created_at"}]}
--   {"type": "retrieval", <every column of agentmem.retrievals>}
--   {"type": "fact", <every column of agentmem.facts>, "history": [<columns of agentmem.fact_history>]}
--   {"type": "cache_entry", <every column of agentmem.cache_entries but guard_version, guard_tokens, guard_features>}
--   {"type": "end", "rows": <the number of rows between header and end>}
-- Columns are written by name from the catalogue (less tenant_id, generated columns and
-- identities), so a column a later release adds is written as one more key and read
-- back by name; a key a file lacks takes the column's default. Vectors are pgvector's
-- text ("[0.1,0.2,...]"), which reads back to the same float32 values; times are
-- ISO 8601 in UTC whatever the session's TimeZone (the export functions pin it).
-- A tenant export is a tenant header, then one user block (header .. end) per user, then an end row.

create or replace function agentmem_private.export_format_version()
returns int
language sql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$ select 1 $$;

comment on function agentmem_private.export_format_version() is
'Internal: the format_version export_user writes; import_user reads it and every older one, and refuses a newer one (AM040).';

create or replace function agentmem_private.import_max_line_bytes()
returns int
language sql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$ select 8 * 1024 * 1024 $$;

comment on function agentmem_private.import_max_line_bytes() is
'Internal: the largest row (line) import_user accepts, in bytes: 8 MiB (a message holds at most '
'100,000 characters of content and of metadata; a 2,000-dimension vector is about 30 kB as text).';

create or replace function agentmem_private.import_max_call_bytes()
returns int
language sql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$ select 16 * 1024 * 1024 $$;

comment on function agentmem_private.import_max_call_bytes() is
'Internal: the most bytes of lines one import_user or import_tenant call takes: 16 MiB (a call holds
about nine times its lines in memory while it checks them; docs/limits.md). agentmem import sends a
larger file in pieces of at most this size, in one transaction.';

create or replace function agentmem_private.check_import_size(p_lines text[])
returns void
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_bytes bigint;
begin
    select pg_catalog.sum(pg_catalog.octet_length(l)) into v_bytes from pg_catalog.unnest(p_lines) as l;
    if v_bytes > agentmem_private.import_max_call_bytes() then
        raise exception 'the lines hold % bytes; one import call takes at most %', v_bytes, agentmem_private.import_max_call_bytes()
        using
            errcode = 'AM021',
            detail = pg_catalog.format('%s lines.', pg_catalog.cardinality(p_lines)),
            hint = 'Nothing was imported. agentmem import sends a file of any size in pieces, in one transaction; '
            || 'or split the export into pieces, each a header, rows and an end row counting them (docs/export.md).';
    end if;
end
$$;

comment on function agentmem_private.check_import_size(text[]) is
'Internal: AM021 when an import call''s lines hold more than import_max_call_bytes() bytes in all.';

create or replace function agentmem_private.installed_version()
returns jsonb
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select pg_catalog.jsonb_build_object('agentmem_version', s.applied_by_version, 'schema_version', s.version)
    from agentmem.schema_migrations as s
    order by s.version desc
    limit 1
$$;

comment on function agentmem_private.installed_version() is
'Internal: the agentmem version that applied the last migration, and its number, from the ledger '
'(the API''s owner may read these two columns of it and nothing else).';

create or replace function agentmem_private.export_skip(p_table regclass)
returns text[]
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select array['tenant_id'] || coalesce(pg_catalog.array_agg(a.attname::text), '{}')
    from pg_catalog.pg_attribute as a
    where
        a.attrelid = p_table and a.attnum > 0 and not a.attisdropped
        and (a.attgenerated <> '' or a.attidentity = 'a')
$$;

comment on function agentmem_private.export_skip(regclass) is
'Internal: the columns of a table an export leaves out: tenant_id, generated columns (derived) and '
'identities generated always (internal numbers).';

-- Over 100 lines: the export's row types, one branch of a union each, in the order of the format
--   described at the top of this file.
create or replace function agentmem_private.export_user_lines(p_tenant text, p_user text)
returns setof text
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
set timezone = 'UTC'
as $$
declare
    v_rows bigint := 0;
    v_n bigint;
    -- pending_vectors: the count of vectors waiting for the index, which an import writes indexed
    v_skip_c text[] := agentmem_private.export_skip('agentmem.conversations') || array['pending_vectors'];
    v_skip_m text[] := agentmem_private.export_skip('agentmem.messages');
    v_skip_r text[] := agentmem_private.export_skip('agentmem.retrievals');
    v_skip_f text[] := agentmem_private.export_skip('agentmem.facts');
    v_skip_h text[] := agentmem_private.export_skip('agentmem.fact_history') || array['fact_id', 'user_id'];
    -- the guard's reading of the question: derived, worked out again by the import
    v_skip_e text[] := agentmem_private.export_skip('agentmem.cache_entries')
        || array['guard_version', 'guard_tokens', 'guard_features'];
    -- Read on the coordinator, apart from the queries Citus sends to a worker.
    v_installed jsonb := agentmem_private.installed_version();
begin
    return next (
        pg_catalog.jsonb_build_object(
            'type', 'header', 'format', 'agentmem-export',
            'format_version', agentmem_private.export_format_version(),
            'exported_at', pg_catalog.now(), 'scope', 'user', 'tenant_id', p_tenant, 'user_id', p_user,
            'models', coalesce((
                select pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('model', mo.model, 'dimension', mo.dimension) order by mo.model)
                from agentmem.models as mo
                where mo.model in (
                    select me.model from agentmem.message_embeddings as me
                    where me.tenant_id = p_tenant and me.user_id = p_user
                    union
                    select f.model from agentmem.facts as f where f.tenant_id = p_tenant and f.user_id = p_user
                    union
                    select e.model from agentmem.cache_entries as e where e.tenant_id = p_tenant and e.user_id = p_user
                )
            ), '[]')
        ) || v_installed
    )::text;

    return query
    select (pg_catalog.jsonb_build_object('type', 'conversation') || (pg_catalog.to_jsonb(c) - v_skip_c))::text
    from agentmem.conversations as c
    where c.tenant_id = p_tenant and c.user_id = p_user
    order by c.created_at, c.conversation_id;
    get diagnostics v_n = row_count;
    v_rows := v_rows + v_n;

    return query
    select (
        pg_catalog.jsonb_build_object('type', 'message') || (pg_catalog.to_jsonb(m) - v_skip_m)
        || pg_catalog.jsonb_build_object('embeddings', coalesce((
            select pg_catalog.jsonb_agg(
                pg_catalog.jsonb_build_object(
                    'model', me.model, 'embedding', coalesce(me.embedding, me.pending_embedding), 'created_at', me.created_at
                )
                order by me.model
            )
            from agentmem.message_embeddings as me
            where me.tenant_id = p_tenant and me.message_id = m.message_id
        ), '[]'))
    )::text
    from agentmem.messages as m
    join agentmem.conversations as c on c.tenant_id = m.tenant_id and c.conversation_id = m.conversation_id
    where m.tenant_id = p_tenant and m.user_id = p_user
    order by c.created_at, c.conversation_id, m.message_index;
    get diagnostics v_n = row_count;
    v_rows := v_rows + v_n;

    return query
    select (pg_catalog.jsonb_build_object('type', 'retrieval') || (pg_catalog.to_jsonb(r) - v_skip_r))::text
    from agentmem.retrievals as r
    join agentmem.messages as m on m.tenant_id = r.tenant_id and m.message_id = r.message_id
    join agentmem.conversations as c on c.tenant_id = m.tenant_id and c.conversation_id = m.conversation_id
    where r.tenant_id = p_tenant and m.user_id = p_user
    order by c.created_at, c.conversation_id, r.message_index;
    get diagnostics v_n = row_count;
    v_rows := v_rows + v_n;

    return query
    select (
        pg_catalog.jsonb_build_object('type', 'fact') || (pg_catalog.to_jsonb(f) - v_skip_f)
        || pg_catalog.jsonb_build_object('history', coalesce((
            select pg_catalog.jsonb_agg(pg_catalog.to_jsonb(h) - v_skip_h order by h.replaced_at, h.valid_from, h.history_id)
            from agentmem.fact_history as h
            where h.tenant_id = p_tenant and h.fact_id = f.fact_id
        ), '[]'))
    )::text
    from agentmem.facts as f
    where f.tenant_id = p_tenant and f.user_id = p_user
    order by f.created_at, f.fact_id;
    get diagnostics v_n = row_count;
    v_rows := v_rows + v_n;

    return query
    select (pg_catalog.jsonb_build_object('type', 'cache_entry') || (pg_catalog.to_jsonb(e) - v_skip_e))::text
    from agentmem.cache_entries as e
    where e.tenant_id = p_tenant and e.user_id = p_user
    order by e.created_at, e.entry_id;
    get diagnostics v_n = row_count;
    v_rows := v_rows + v_n;

    return next pg_catalog.jsonb_build_object('type', 'end', 'rows', v_rows)::text;
end
$$;

comment on function agentmem_private.export_user_lines(text, text) is
'Internal: the export of one user of a tenant, header to end row (see the header of sql/55_export.sql).';

create or replace function agentmem.export_user(user_id text)
returns table (line text)
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
set timezone = 'UTC'
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_n bigint;
begin
    perform agentmem_private.check_user_id(export_user.user_id);
    -- A consistent copy: no write of the user runs while it is read.
    perform agentmem_private.lock_user(v_tenant, export_user.user_id, true);
    return query select l from agentmem_private.export_user_lines(v_tenant, export_user.user_id) as l;
    get diagnostics v_n = row_count;
    perform agentmem_private.access_receipt(v_tenant, 'export_user', pg_catalog.jsonb_build_object('rows', v_n - 2));
end
$$;

comment on function agentmem.export_user(text) is
'Export one user of the current tenant as JSON Lines, one JSON object per row in a stable order.
The rows: a header (format agentmem-export, format_version, agentmem_version, schema_version, exported_at, tenant_id, user_id, the models used), then conversations, messages (each with its embeddings and metadata), retrieval records, facts (each with its history), cached answers the user''s turns stored, and an end row with the number of rows between (so that a truncated file is refused on import).
Keys are the tables'' column names; vectors are pgvector text. From psql, the file:
  \copy (select line from agentmem.export_user(user_id => ''alice'')) to ''alice.jsonl'' with (format csv, quote e''\x01'', delimiter e''\x02'')
(CSV with a quote and delimiter that JSON never holds writes each line as it is; the default text
format would double every backslash). `agentmem export --user alice > alice.jsonl` writes the same bytes.
Takes the user''s erasure lock exclusive while it reads (a consistent copy), and leaves a receipt in
agentmem.access_log (kind export_user, rows; no content, no identifier). A user with no data gives a
header and an end row. AM020 for a bad user_id.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem_private.try_jsonb(p_text text)
returns jsonb
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    return p_text::jsonb;
exception when others then
    return null;
end
$$;

comment on function agentmem_private.try_jsonb(text) is
'Internal: the text as jsonb, or NULL when it is not JSON.';

create or replace function agentmem_private.import_refuse(p_code text, p_message text, p_detail text, p_hint text)
returns void
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    raise exception '%', p_message
    using errcode = p_code, detail = coalesce(p_detail, ''), hint = coalesce(p_hint, 'Nothing was imported.');
end
$$;

comment on function agentmem_private.import_refuse(text, text, text, text) is
'Internal: raise an import error (nothing is written: the import is one transaction).';

create or replace function agentmem_private.import_insert(p_table regclass, p_tenant text, p_rows jsonb)
returns bigint
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_cols text;
    v_vals text;
    v_n bigint;
begin
    if p_rows is null or pg_catalog.jsonb_array_length(p_rows) = 0 then
        return 0;
    end if;
    -- Every column but tenant_id, generated ones and identities, by name; a
    -- NOT NULL column a row lacks takes its default.
    select
        pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', ' order by a.attnum),
        pg_catalog.string_agg(
            case
                when a.attnotnull and d.adbin is not null
                    then pg_catalog.format('coalesce(r.%I, %s)', a.attname, pg_catalog.pg_get_expr(d.adbin, d.adrelid))
                else pg_catalog.format('r.%I', a.attname)
            end,
            ', ' order by a.attnum
        )
    into v_cols, v_vals
    from pg_catalog.pg_attribute as a
    left join pg_catalog.pg_attrdef as d on d.adrelid = a.attrelid and d.adnum = a.attnum
    where
        a.attrelid = p_table and a.attnum > 0 and not a.attisdropped
        and a.attgenerated = '' and a.attidentity <> 'a' and a.attname <> 'tenant_id';
    execute pg_catalog.format(
        'with ins as (insert into %s (tenant_id, %s) select $1, %s from pg_catalog.jsonb_populate_recordset(null::%s, $2) as r '
        'on conflict do nothing returning 1) select pg_catalog.count(*) from ins',
        p_table, v_cols, v_vals, p_table
    ) into v_n using p_tenant, p_rows;
    return v_n;
end
$$;

comment on function agentmem_private.import_insert(regclass, text, jsonb) is
'Internal: insert the rows (a JSON array of objects keyed by column name) into the table for the tenant, '
'skipping rows whose key is already there; returns how many were inserted.';

create or replace function agentmem_private.import_read_header(p_lines text[])
returns jsonb
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_n int;
    v_bad int;
    v_header jsonb;
    v_end jsonb;
    v_user text;
    v_version numeric;
begin
    v_n := coalesce(pg_catalog.cardinality(p_lines), 0);
    perform agentmem_private.check_import_size(p_lines);
    if p_lines is not null and v_n > 0 and (pg_catalog.array_ndims(p_lines) <> 1 or pg_catalog.array_lower(p_lines, 1) <> 1) then
        perform agentmem_private.import_refuse('AM020', 'lines must be a one-dimensional array from index 1', null, null);
    end if;
    select pg_catalog.min(i) into v_bad from pg_catalog.unnest(p_lines) with ordinality as t (l, i)
    where pg_catalog.octet_length(l) > agentmem_private.import_max_line_bytes();
    if v_bad is not null then
        perform agentmem_private.import_refuse(
            'AM021', pg_catalog.format('line %s is over %s bytes', v_bad, agentmem_private.import_max_line_bytes()),
            'No row agentmem exports is that large: a message holds at most 100,000 characters.',
            'Nothing was imported. Check that the file is an agentmem export.'
        );
    end if;
    -- Every line a JSON object.
    select pg_catalog.min(i) into v_bad from pg_catalog.unnest(p_lines) with ordinality as t (l, i)
    where l is null or pg_catalog.jsonb_typeof(agentmem_private.try_jsonb(l)) is distinct from 'object';
    if v_bad is not null then
        perform agentmem_private.import_refuse(
            'AM020', pg_catalog.format('line %s is not a JSON object', v_bad),
            'Each line of an export is one JSON object (JSON Lines).', null
        );
    end if;
    if v_n < 2 then
        perform agentmem_private.import_refuse(
            'AM020', 'the export is truncated: it has no end row',
            pg_catalog.format('%s lines; an export has at least a header and an end row.', v_n), null
        );
    end if;
    v_header := p_lines[1]::jsonb;
    if v_header ->> 'type' is distinct from 'header' or v_header ->> 'format' is distinct from 'agentmem-export' then
        perform agentmem_private.import_refuse(
            'AM020', 'line 1 is not the header of an agentmem export',
            'The first line must be {"type": "header", "format": "agentmem-export", ...}.', null
        );
    end if;
    if pg_catalog.jsonb_typeof(v_header -> 'format_version') is distinct from 'number'
        or (v_header ->> 'format_version')::numeric <> pg_catalog.trunc((v_header ->> 'format_version')::numeric)
        or (v_header ->> 'format_version')::numeric < 1 then
        perform agentmem_private.import_refuse('AM020', 'the header has no valid format_version', null, null);
    end if;
    v_version := (v_header ->> 'format_version')::numeric;
    if v_version > agentmem_private.export_format_version() then
        perform agentmem_private.import_refuse(
            'AM040',
            pg_catalog.format(
                'the export is format version %s; this agentmem reads versions up to %s',
                v_version, agentmem_private.export_format_version()
            ),
            pg_catalog.format('It was written by agentmem %s.', coalesce(v_header ->> 'agentmem_version', '(unknown)')),
            'Upgrade agentmem here (agentmem migrate) to the writer''s version or later, then import again.'
        );
    end if;
    if v_header ->> 'scope' is distinct from 'user' or pg_catalog.jsonb_typeof(v_header -> 'user_id') is distinct from 'string' then
        perform agentmem_private.import_refuse(
            'AM020', 'the header is not that of one user''s export (scope user, a user_id)',
            null, 'A tenant export is imported with agentmem.import_tenant (DBA), or agentmem import --tenant.'
        );
    end if;
    v_user := v_header ->> 'user_id';
    perform agentmem_private.check_user_id(v_user);
    v_end := p_lines[v_n]::jsonb;
    if v_end ->> 'type' is distinct from 'end' or pg_catalog.jsonb_typeof(v_end -> 'rows') is distinct from 'number'
        or (v_end ->> 'rows')::numeric <> v_n - 2 then
        perform agentmem_private.import_refuse(
            'AM020', 'the export is truncated: its last line is not the end row that counts the rows before it',
            pg_catalog.format('%s lines read.', v_n), 'Export again, or copy the whole file.'
        );
    end if;
    return v_header;
end
$$;

comment on function agentmem_private.import_read_header(text[]) is
'Internal: the first step of import_user_lines: the lines as a whole (sizes, JSON objects, a header of one '
'user''s export of a version this agentmem reads, an end row counting the rows between); returns the header.';

create or replace function agentmem_private.import_check_row_types(p_docs jsonb, p_header jsonb)
returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_bad int;
    v_docs jsonb := p_docs;
    v_header jsonb := p_header;
    v_user text := p_header ->> 'user_id';
begin
    -- Every row of a known type, of this user and of the header's tenant.
    select pg_catalog.min(i) into v_bad from pg_catalog.jsonb_array_elements(v_docs) with ordinality as t (d, i)
    where
        d ->> 'type' is null
        or d ->> 'type' not in ('conversation', 'message', 'retrieval', 'fact', 'cache_entry', 'header', 'end');
    if v_bad is not null then
        perform agentmem_private.import_refuse(
            'AM020', pg_catalog.format('line %s has no known type', v_bad + 1),
            'Types: header, conversation, message, retrieval, fact, cache_entry, end.', null
        );
    end if;
    select pg_catalog.min(i) into v_bad from pg_catalog.jsonb_array_elements(v_docs) with ordinality as t (d, i)
    where d ->> 'type' in ('header', 'end');
    if v_bad is not null then
        perform agentmem_private.import_refuse(
            'AM020', pg_catalog.format('line %s is a second header or end row', v_bad + 1),
            'import_user reads one user''s export; a tenant export goes to import_tenant.', null
        );
    end if;
    select pg_catalog.min(i) into v_bad from pg_catalog.jsonb_array_elements(v_docs) with ordinality as t (d, i)
    where
        (d ? 'tenant_id' and d ->> 'tenant_id' is distinct from v_header ->> 'tenant_id')
        or (d ? 'user_id' and d ->> 'user_id' is distinct from v_user)
        or (d ->> 'type' in ('conversation', 'message', 'fact', 'cache_entry') and not d ? 'user_id');
    if v_bad is not null then
        perform agentmem_private.import_refuse(
            'AM020', pg_catalog.format('line %s is a row of another user or tenant than the header''s', v_bad + 1),
            'Every row of a user''s export belongs to the header''s user.', null
        );
    end if;
end
$$;

comment on function agentmem_private.import_check_row_types(jsonb, jsonb) is
'Internal: a step of import_user_lines: every row (p_docs, the lines between header and end row) of a known '
'type, of the header''s user and tenant.';

create or replace function agentmem_private.import_check_ids(p_tenant text, p_user text, p_convs jsonb, p_msgs jsonb, p_rets jsonb, p_facts jsonb, p_entries jsonb)
returns jsonb
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_id text;
    v_user text := p_user;
    v_convs jsonb := p_convs;
    v_msgs jsonb := p_msgs;
    v_rets jsonb := p_rets;
    v_facts jsonb := p_facts;
    v_entries jsonb := p_entries;
begin
    -- Ids: present, well-formed, once each in the file.
    select x.id into v_id from (
        select d ->> 'conversation_id' as id, 1 as k from pg_catalog.jsonb_array_elements(v_convs) as t (d)
        union all select d ->> 'message_id', 2 from pg_catalog.jsonb_array_elements(v_msgs) as t (d)
        union all select d ->> 'message_id', 3 from pg_catalog.jsonb_array_elements(v_rets) as t (d)
        union all select d ->> 'fact_id', 4 from pg_catalog.jsonb_array_elements(v_facts) as t (d)
        union all select d ->> 'entry_id', 5 from pg_catalog.jsonb_array_elements(v_entries) as t (d)
    ) as x
    where x.id is null or x.id !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
    limit 1;
    if found then
        perform agentmem_private.import_refuse(
            'AM020', pg_catalog.format('a row has a missing or malformed id: %s', coalesce(pg_catalog.left(v_id, 60), 'NULL')), null, null
        );
    end if;
    select pg_catalog.lower(x.id) into v_id from (
        select d ->> 'conversation_id' as id, 1 as k from pg_catalog.jsonb_array_elements(v_convs) as t (d)
        union all select d ->> 'message_id', 2 from pg_catalog.jsonb_array_elements(v_msgs) as t (d)
        union all select d ->> 'message_id', 3 from pg_catalog.jsonb_array_elements(v_rets) as t (d)
        union all select d ->> 'fact_id', 4 from pg_catalog.jsonb_array_elements(v_facts) as t (d)
        union all select d ->> 'entry_id', 5 from pg_catalog.jsonb_array_elements(v_entries) as t (d)
    ) as x
    group by x.k, pg_catalog.lower(x.id) having pg_catalog.count(*) > 1
    limit 1;
    if found then
        perform agentmem_private.import_refuse(
            'AM020', pg_catalog.format('the export holds row %s twice', v_id),
            'Each conversation, message, retrieval record, fact and cached answer appears once.', null
        );
    end if;
    -- Messages in the file's conversations or in the user's here (an earlier
    -- piece of the same file: agentmem import sends a large file in pieces).
    -- (anti-joins: each array is expanded once)
    select m.id into v_id
    from (select d ->> 'message_id' as id, d ->> 'conversation_id' as conv from pg_catalog.jsonb_array_elements(v_msgs) as t (d)) as m
    left join (select d ->> 'conversation_id' as conv from pg_catalog.jsonb_array_elements(v_convs) as t (d)) as c on c.conv = m.conv
    where
        c.conv is null
        and not case when m.conv ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' then exists (
            select from agentmem.conversations as h
            where h.tenant_id = p_tenant and h.conversation_id = m.conv::uuid and h.user_id = v_user
        ) else false end
    limit 1;
    if found then
        perform agentmem_private.import_refuse(
            'AM020', pg_catalog.format('message %s belongs to no conversation of the export', v_id), null, null
        );
    end if;
    -- A retrieval record goes with its message, of the file or the user's here:
    -- its conversation and index are the message's, whatever the row says
    -- (as record_retrieval takes them), and the message is a user message.
    select coalesce(pg_catalog.jsonb_agg(
        r.d || pg_catalog.jsonb_build_object(
            'conversation_id', coalesce(fm.d -> 'conversation_id', pg_catalog.to_jsonb(hm.conversation_id)),
            'message_index', coalesce(fm.d -> 'message_index', pg_catalog.to_jsonb(hm.message_index)),
            'role', coalesce(fm.d ->> 'role', hm.role)
        )
    ), '[]'), pg_catalog.min(r.d ->> 'message_id') filter (where fm.d is null and hm.message_id is null)
    into v_rets, v_id
    from pg_catalog.jsonb_array_elements(v_rets) as r (d)
    left join pg_catalog.jsonb_array_elements(v_msgs) as fm (d) on fm.d ->> 'message_id' = r.d ->> 'message_id'
    left join agentmem.messages as hm
        on hm.tenant_id = p_tenant and hm.message_id = (r.d ->> 'message_id')::uuid and hm.user_id = v_user and fm.d is null;
    if v_id is not null then
        perform agentmem_private.import_refuse(
            'AM020', pg_catalog.format('retrieval record of message %s, which the export does not hold', v_id), null, null
        );
    end if;
    select r.d ->> 'message_id' into v_id from pg_catalog.jsonb_array_elements(v_rets) as r (d)
    where r.d ->> 'role' is distinct from 'user'
    limit 1;
    if found then
        perform agentmem_private.import_refuse(
            'AM020', pg_catalog.format('retrieval record of message %s, which is not a user message', v_id),
            'Retrievals are recorded against user messages (record_retrieval).', null
        );
    end if;
    
    return (select coalesce(pg_catalog.jsonb_agg(r.d - 'role'), '[]') from pg_catalog.jsonb_array_elements(v_rets) as r (d));
end
$$;

comment on function agentmem_private.import_check_ids(text, text, jsonb, jsonb, jsonb, jsonb, jsonb) is
'Internal: a step of import_user_lines: every row''s id well-formed and once in the file, every message in a '
'conversation of the file or of the user here, every retrieval record on a user message; returns the '
'retrieval records with their message''s conversation and index.';

create or replace function agentmem_private.import_check_values(p_docs jsonb)
returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_docs jsonb := p_docs;
    v_doc jsonb;
    v_line bigint;
    v_what text;
begin
    -- Every value as the call that writes it checks it, by the same functions
    -- (start_conversation, store_messages, record_retrieval, upsert_fact, cache_store).
    begin
        for v_doc, v_line in select t.d, t.i + 1 from pg_catalog.jsonb_array_elements(v_docs) with ordinality as t (d, i) loop
            v_what := pg_catalog.format('line %s: ', v_line);
            case v_doc ->> 'type'
                when 'conversation' then
                    perform agentmem_private.check_title(v_doc ->> 'title');
                    perform agentmem_private.check_metadata(v_what || 'metadata', v_doc -> 'metadata');
                when 'message' then
                    perform agentmem_private.check_role(v_what, v_doc ->> 'role');
                    perform agentmem_private.check_text(v_what || 'content', v_doc ->> 'content', 100000);
                    perform agentmem_private.check_metadata(v_what || 'metadata', v_doc -> 'metadata');
                    if v_doc ? 'occurred_at' then
                        perform agentmem_private.check_occurred_at(v_what, (v_doc ->> 'occurred_at')::timestamptz);
                    end if;
                when 'retrieval' then
                    perform agentmem_private.check_doc_ids(
                        array(select pg_catalog.jsonb_array_elements_text(coalesce(v_doc -> 'doc_ids', '[]')))
                    );
                when 'fact' then
                    perform agentmem_private.check_fact_subject(v_doc ->> 'subject');
                    perform agentmem_private.check_fact_text(v_doc ->> 'fact');
                    perform agentmem_private.check_fact_subject(h ->> 'subject'), agentmem_private.check_fact_text(h ->> 'fact')
                    from pg_catalog.jsonb_array_elements(
                        case when pg_catalog.jsonb_typeof(v_doc -> 'history') = 'array' then v_doc -> 'history' else '[]' end
                    ) as h;
                when 'cache_entry' then
                    perform agentmem_private.cache_check_question(v_doc ->> 'question');
                    perform agentmem_private.check_text(v_what || 'answer', v_doc ->> 'answer', 100000);
                    perform agentmem_private.cache_check_scope(
                        coalesce(v_doc ->> 'acl_hash', ''), coalesce(v_doc ->> 'prompt_version', ''),
                        coalesce(v_doc ->> 'llm_model', '')
                    );
                    perform agentmem_private.cache_check_sources(
                        array(select pg_catalog.jsonb_array_elements_text(coalesce(v_doc -> 'source_ids', '[]')))
                    );
                else
                    null;
            end case;
        end loop;
    exception when data_exception then
        perform agentmem_private.import_refuse(
            'AM020', pg_catalog.format('line %s: a value of the export does not fit its column: %s', v_line, sqlerrm), null, null
        );
    end;
end
$$;

comment on function agentmem_private.import_check_values(jsonb) is
'Internal: a step of import_user_lines: every value of every row as the call that writes it checks it.';

create or replace function agentmem_private.import_check_owners_and_models(p_tenant text, p_user text, p_convs jsonb, p_msgs jsonb, p_facts jsonb, p_entries jsonb)
returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_id text;
    v_model text;
    v_vec text;
    v_vector agentmem.message_embeddings.embedding%type;
    v_user text := p_user;
    v_convs jsonb := p_convs;
    v_msgs jsonb := p_msgs;
    v_facts jsonb := p_facts;
    v_entries jsonb := p_entries;
begin
    -- Ids taken by another user's rows in this tenant.
    select x.id into v_id from (
        select (d ->> 'conversation_id')::uuid as id from pg_catalog.jsonb_array_elements(v_convs) as t (d)
        where exists (
            select from agentmem.conversations as c
            where c.tenant_id = p_tenant and c.conversation_id = (d ->> 'conversation_id')::uuid and c.user_id <> v_user
        )
        union all
        select (d ->> 'message_id')::uuid from pg_catalog.jsonb_array_elements(v_msgs) as t (d)
        where exists (
            select from agentmem.messages as m
            where m.tenant_id = p_tenant and m.message_id = (d ->> 'message_id')::uuid and m.user_id <> v_user
        )
        union all
        select (d ->> 'fact_id')::uuid from pg_catalog.jsonb_array_elements(v_facts) as t (d)
        where exists (
            select from agentmem.facts as f
            where f.tenant_id = p_tenant and f.fact_id = (d ->> 'fact_id')::uuid and f.user_id <> v_user
        )
        union all
        select (d ->> 'entry_id')::uuid from pg_catalog.jsonb_array_elements(v_entries) as t (d)
        where exists (
            select from agentmem.cache_entries as e
            where
                e.tenant_id = p_tenant and e.entry_id = (d ->> 'entry_id')::uuid
                and e.user_id is distinct from v_user
        )
    ) as x
    limit 1;
    if found then
        perform agentmem_private.import_refuse(
            'AM031', pg_catalog.format('id %s is taken in this tenant by a row of another user', v_id),
            'Ids are kept on import; this one belongs to someone else here.',
            'Nothing was imported. Import into another tenant, or erase the other row first.'
        );
    end if;

    -- Models registered here, embeddings of their dimension.
    select x.model into v_model from (
        select e ->> 'model' as model from pg_catalog.jsonb_array_elements(v_msgs) as t (d)
        cross join lateral pg_catalog.jsonb_array_elements(case when pg_catalog.jsonb_typeof(d -> 'embeddings') = 'array' then d -> 'embeddings' else '[]' end) as e
        union select d ->> 'model' from pg_catalog.jsonb_array_elements(v_facts) as t (d)
        union select d ->> 'model' from pg_catalog.jsonb_array_elements(v_entries) as t (d)
    ) as x
    where x.model is null or not exists (select from agentmem.models as mo where mo.model = x.model)
    limit 1;
    if found then
        perform agentmem_private.import_refuse(
            'AM011', pg_catalog.format('the export uses the model %s, which is not registered here', coalesce(v_model, 'NULL')),
            'Embeddings are kept on import, so their model must be registered with the same dimension.',
            'Nothing was imported. A DBA registers it (agentmem.register_model), then import again.'
        );
    end if;
    for v_model, v_vec in
        select e ->> 'model', e ->> 'embedding' from pg_catalog.jsonb_array_elements(v_msgs) as t (d)
        cross join lateral pg_catalog.jsonb_array_elements(d -> 'embeddings') as e
        union all select d ->> 'model', d ->> 'embedding' from pg_catalog.jsonb_array_elements(v_facts) as t (d)
        union all select d ->> 'model', d ->> 'embedding' from pg_catalog.jsonb_array_elements(v_entries) as t (d)
    loop
        begin
            v_vector := v_vec;
            perform agentmem_private.check_embedding(v_model, v_vector);
        exception when sqlstate 'AM010' then
            perform agentmem_private.import_refuse(
                'AM010', 'the export holds an embedding that does not fit its model: ' || sqlerrm, null, null
            );
        when data_exception then
            perform agentmem_private.import_refuse(
                'AM010', 'the export holds an embedding that is not a vector: ' || sqlerrm, null, null
            );
        end;
    end loop;
end
$$;

comment on function agentmem_private.import_check_owners_and_models(text, text, jsonb, jsonb, jsonb, jsonb) is
'Internal: a step of import_user_lines: no id of the file taken by another user''s row in the tenant, every '
'model registered here and every embedding of its model''s dimension.';

create or replace function agentmem_private.import_write(p_tenant text, p_convs jsonb, p_msgs jsonb, p_rets jsonb, p_facts jsonb, p_entries jsonb)
returns jsonb
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_new_facts jsonb;
    v_count jsonb := '{}';
    v_convs jsonb := p_convs;
    v_msgs jsonb := p_msgs;
    v_rets jsonb := p_rets;
    v_facts jsonb := p_facts;
    v_entries jsonb := p_entries;
begin
    -- Facts new here (a fact already there keeps its history as it is).
    select coalesce(pg_catalog.jsonb_agg(d), '[]') into v_new_facts from pg_catalog.jsonb_array_elements(v_facts) as t (d)
    where not exists (
        select from agentmem.facts as f where f.tenant_id = p_tenant and f.fact_id = (d ->> 'fact_id')::uuid
    );
    begin
        v_count := v_count || pg_catalog.jsonb_build_object(
            'conversations', agentmem_private.import_insert('agentmem.conversations', p_tenant, v_convs),
            'messages', agentmem_private.import_insert('agentmem.messages', p_tenant, v_msgs)
        );
        v_count := v_count || pg_catalog.jsonb_build_object(
            'message_embeddings', agentmem_private.import_insert('agentmem.message_embeddings', p_tenant, (
                select coalesce(pg_catalog.jsonb_agg(
                    e || pg_catalog.jsonb_build_object(
                        'message_id', d -> 'message_id', 'user_id', d -> 'user_id',
                        'conversation_id', d -> 'conversation_id'
                    )
                    -- the message's time, where the file has it (a copy, as in the table)
                    || case when d ? 'occurred_at' then pg_catalog.jsonb_build_object('occurred_at', d -> 'occurred_at') else '{}' end
                ), '[]')
                from pg_catalog.jsonb_array_elements(v_msgs) as t (d)
                cross join lateral pg_catalog.jsonb_array_elements(d -> 'embeddings') as e
            )),
            'retrievals', agentmem_private.import_insert('agentmem.retrievals', p_tenant, v_rets),
            'facts', agentmem_private.import_insert('agentmem.facts', p_tenant, v_facts),
            'fact_history', agentmem_private.import_insert('agentmem.fact_history', p_tenant, (
                select coalesce(pg_catalog.jsonb_agg(h || pg_catalog.jsonb_build_object('fact_id', d -> 'fact_id', 'user_id', d -> 'user_id')), '[]')
                from pg_catalog.jsonb_array_elements(v_new_facts) as t (d)
                cross join lateral pg_catalog.jsonb_array_elements(
                    case when pg_catalog.jsonb_typeof(d -> 'history') = 'array' then d -> 'history' else '[]' end
                ) as h
            )),
            -- the guard's reading of each question worked out here, never taken from the file
            'cache_entries', agentmem_private.import_insert('agentmem.cache_entries', p_tenant, (
                select coalesce(pg_catalog.jsonb_agg(
                    (d - array['guard_version', 'guard_tokens', 'guard_features'])
                    || pg_catalog.jsonb_build_object(
                        'guard_version', g.guard_version, 'guard_tokens', g.guard_tokens,
                        'guard_features', g.guard_features
                    )
                ), '[]')
                from pg_catalog.jsonb_array_elements(v_entries) as t (d)
                cross join lateral agentmem_private.entry_guard(d ->> 'question') as g
            ))
        );
        -- A conversation already here that the file's messages go past (an older
        -- import of it) takes its next index from them.
        update agentmem.conversations as c
        set next_index = x.next_index
        from (
            select (d ->> 'conversation_id')::uuid as conversation_id, pg_catalog.max((d ->> 'message_index')::int) + 1 as next_index
            from pg_catalog.jsonb_array_elements(v_msgs) as t (d)
            group by 1
        ) as x
        where c.tenant_id = p_tenant and c.conversation_id = x.conversation_id and c.next_index < x.next_index;
        -- The BM25 statistics of the file's users, rebuilt from their messages
        -- (rows already here were skipped, so the file's count could be wrong).
        perform agentmem_private.recount_terms(p_tenant, x.user_id)
        from (select distinct d ->> 'user_id' as user_id from pg_catalog.jsonb_array_elements(v_msgs) as t (d)) as x;
        -- The reverse index of the cached answers' sources.
        insert into agentmem.cache_entry_sources as s (tenant_id, doc_id, entry_id)
        select distinct p_tenant, src, (d ->> 'entry_id')::uuid
        from pg_catalog.jsonb_array_elements(v_entries) as t (d)
        cross join lateral pg_catalog.jsonb_array_elements_text(coalesce(d -> 'source_ids', '[]')) as src
        on conflict do nothing;
    exception
        when unique_violation or exclusion_violation then
            perform agentmem_private.import_refuse(
                'AM031', 'the export collides with rows already here: ' || sqlerrm,
                'E.g. a fact for a subject the user already has a different fact for, or a message index taken.',
                'Nothing was imported. Erase the user here first (forget_user) to import the export whole.'
            );
        when foreign_key_violation or not_null_violation or check_violation then
            perform agentmem_private.import_refuse(
                'AM020', 'a row of the export does not fit: ' || sqlerrm, null, null
            );
        when data_exception then
            perform agentmem_private.import_refuse(
                'AM020', 'a value of the export does not fit its column: ' || sqlerrm, null, null
            );
    end;
    return v_count;
end
$$;

comment on function agentmem_private.import_write(text, jsonb, jsonb, jsonb, jsonb, jsonb) is
'Internal: the last step of import_user_lines, once every check passed: insert the rows into the tenant, skipping '
'rows already there; returns the rows inserted per table.';

create or replace function agentmem_private.import_user_lines(p_tenant text, p_lines text[])
returns jsonb
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_n int := coalesce(pg_catalog.cardinality(p_lines), 0);
    v_header jsonb := agentmem_private.import_read_header(p_lines);
    v_user text := v_header ->> 'user_id';
    v_docs jsonb;
    v_convs jsonb;
    v_msgs jsonb;
    v_rets jsonb;
    v_facts jsonb;
    v_entries jsonb;
begin
    -- Checked whole before anything is written, step by step; any refusal writes nothing.
    select coalesce(pg_catalog.jsonb_agg(l::jsonb order by i), '[]') into v_docs
    from pg_catalog.unnest(p_lines[2:v_n - 1]) with ordinality as t (l, i);
    perform agentmem_private.import_check_row_types(v_docs, v_header);
    select
        coalesce(pg_catalog.jsonb_agg(d) filter (where d ->> 'type' = 'conversation'), '[]'),
        coalesce(pg_catalog.jsonb_agg(d) filter (where d ->> 'type' = 'message'), '[]'),
        coalesce(pg_catalog.jsonb_agg(d) filter (where d ->> 'type' = 'retrieval'), '[]'),
        coalesce(pg_catalog.jsonb_agg(d) filter (where d ->> 'type' = 'fact'), '[]'),
        coalesce(pg_catalog.jsonb_agg(d) filter (where d ->> 'type' = 'cache_entry'), '[]')
    into v_convs, v_msgs, v_rets, v_facts, v_entries
    from pg_catalog.jsonb_array_elements(v_docs) as t (d);
    v_rets := agentmem_private.import_check_ids(p_tenant, v_user, v_convs, v_msgs, v_rets, v_facts, v_entries);
    perform agentmem_private.import_check_values(v_docs);
    perform agentmem_private.import_check_owners_and_models(p_tenant, v_user, v_convs, v_msgs, v_facts, v_entries);
    return agentmem_private.import_write(p_tenant, v_convs, v_msgs, v_rets, v_facts, v_entries)
        || pg_catalog.jsonb_build_object('rows_read', v_n - 2);
end
$$;

comment on function agentmem_private.import_user_lines(text, text[]) is
'Internal: check one user''s export (header to end row) whole, then insert its rows into the tenant, '
'skipping rows already there; returns the rows inserted per table.';

create or replace function agentmem.import_user(lines text[])
returns agentmem.access_log
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_user text := agentmem_private.try_jsonb(import_user.lines[1]) ->> 'user_id';
    v_count jsonb;
begin
    -- The user's lock exclusive: an import runs alone among the user's writes,
    -- so two imports of one file leave one copy.
    if v_user is not null and not agentmem_private.is_blank(v_user) and pg_catalog.length(v_user) <= 256 then
        perform agentmem_private.lock_user(v_tenant, v_user, true);
    end if;
    v_count := agentmem_private.import_user_lines(v_tenant, import_user.lines);
    return agentmem_private.access_receipt(v_tenant, 'import_user', v_count);
end
$$;

comment on function agentmem.import_user(lines text[]) is
'Import one user''s export (the lines export_user wrote, in order) into the current tenant; returns the receipt.
The receipt holds rows inserted per table and rows_read, kept in agentmem.access_log.
All or nothing: the whole file is checked before anything is written, and any refusal writes nothing.
One call takes at most 16 MiB of lines: a larger file goes in pieces, each the header, rows in the
file''s order and an end row counting them, in one transaction (agentmem import does so); a piece may
name conversations and messages of the user that an earlier piece imported. A retrieval record takes
its conversation and index from its message (of the file, or the user''s here), and must be of a user
message.
Idempotent: rows already here (same id, same user) are skipped, so importing twice leaves one copy.
Ids are kept. Embeddings are kept and must be of a model registered here with the same dimension.
Reads format_version 1 and older; a key a file lacks takes the column''s default, a key this release
does not know is ignored.
Refusals: AM040 a newer format_version; AM020 a line that is not a JSON object, no header, no end row
or one that miscounts (a truncated file), a second header, a row of unknown type, a row of another user
or tenant than the header''s, a missing or malformed id, a row twice, a message outside the file''s
conversations, a value that does not fit its column, a cached answer without the header''s user;
AM021 a line over 8 MiB (8,388,608 bytes), or lines over 16 MiB (16,777,216 bytes) in all;
every value the call that writes it refuses, with its code and by the same check (content, role,
occurred_at, metadata, title, fact and subject, document ids, cached question, answer and sources);
AM011 a model not registered here; AM010 an embedding of the wrong dimension or not a vector;
AM031 an id taken here by another user''s row, or a row colliding with one already here (a subject
the user already has another fact for, a message index taken).
Takes the user''s erasure lock exclusive.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.export_tenant(tenant_id text)
returns table (line text)
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
set timezone = 'UTC'
as $$
declare
    v_user text;
    v_users bigint := 0;
    v_rows bigint := 0;
    v_n bigint;
begin
    perform agentmem_private.check_sees_every_tenant(
        'agentmem.export_tenant', 'an export of a tenant reads every user of it',
        'Run it as a superuser or a role with BYPASSRLS (agentmem export --tenant).'
    );
    if agentmem_private.is_blank(export_tenant.tenant_id) then
        raise exception 'tenant_id must be a non-empty text' using errcode = 'AM020';
    end if;
    line := (
        pg_catalog.jsonb_build_object(
            'type', 'header', 'format', 'agentmem-export', 'format_version', agentmem_private.export_format_version(),
            'exported_at', pg_catalog.now(), 'scope', 'tenant', 'tenant_id', export_tenant.tenant_id
        ) || agentmem_private.installed_version()
    )::text;
    return next;
    -- One user at a time: each block is read and sent before the next one.
    for v_user in
        select distinct u.user_id from (
            select c.user_id from agentmem.conversations as c where c.tenant_id = export_tenant.tenant_id
            union
            select f.user_id from agentmem.facts as f where f.tenant_id = export_tenant.tenant_id
            union
            select e.user_id from agentmem.cache_entries as e
            where e.tenant_id = export_tenant.tenant_id and e.user_id is not null
        ) as u
        order by u.user_id
    loop
        return query select l from agentmem_private.export_user_lines(export_tenant.tenant_id, v_user) as l;
        get diagnostics v_n = row_count;
        v_rows := v_rows + v_n;
        v_users := v_users + 1;
    end loop;
    line := pg_catalog.jsonb_build_object('type', 'end', 'rows', v_rows, 'users', v_users)::text;
    return next;
    perform agentmem_private.access_receipt(
        export_tenant.tenant_id, 'export_tenant', pg_catalog.jsonb_build_object('users', v_users, 'rows', v_rows - 2 * v_users)
    );
end
$$;

comment on function agentmem.export_tenant(text) is
'Export every user of one tenant (DBA only), as JSON Lines: a tenant header, each user''s block as export_user writes it, an end row.
Security invoker, not granted to agentmem_app: run it as a superuser or BYPASSRLS role (AM041 otherwise). A header of scope tenant, then one block per user exactly as export_user writes it (header ..
end), in user_id order, then an end row (rows, users).
Run it in a REPEATABLE READ transaction for a copy consistent across users (agentmem export --tenant
does). Read user by user; the server keeps the result in a tuplestore, which goes to disk past work_mem, and
a client reading it through a cursor (agentmem export --tenant) holds one batch at a time, so neither
side holds the tenant in memory. Cached answers stored without a user_id are not exported (they
belong to no one). Leaves a receipt in agentmem.access_log (kind export_tenant).
Called by: the DBA (granted to no role).';

create or replace function agentmem.import_tenant(tenant_id text, lines text[])
returns jsonb
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_count jsonb := '{}';
    v_one jsonb;
    v_start int;
    v_i int;
    v_doc jsonb;
    v_users int := 0;
    v_n int := coalesce(pg_catalog.cardinality(import_tenant.lines), 0);
    v_key text;
begin
    perform agentmem_private.check_sees_every_tenant(
        'agentmem.import_tenant', 'an import of a tenant writes rows of a tenant it does not set',
        'Run it as a superuser or a role with BYPASSRLS (agentmem import --tenant).'
    );
    perform agentmem.set_tenant(tenant_id => import_tenant.tenant_id, local => true);
    perform agentmem_private.check_import_size(import_tenant.lines);
    -- A whole tenant export, or part of one made of whole user blocks (agentmem
    -- import --tenant sends one block per call, in one transaction).
    v_i := 1;
    while v_i <= v_n loop
        v_doc := agentmem_private.try_jsonb(import_tenant.lines[v_i]);
        if v_doc ->> 'type' = 'header' and v_doc ->> 'scope' = 'tenant' then
            if (v_doc ->> 'format_version')::numeric > agentmem_private.export_format_version() then
                perform agentmem_private.import_refuse(
                    'AM040', pg_catalog.format('the export is format version %s; this agentmem reads versions up to %s',
                        v_doc ->> 'format_version', agentmem_private.export_format_version()),
                    null, 'Upgrade agentmem here (agentmem migrate), then import again.'
                );
            end if;
            v_i := v_i + 1;
            continue;
        end if;
        if v_doc ->> 'type' = 'end' and v_doc ? 'users' then
            v_i := v_i + 1;
            continue;
        end if;
        v_start := v_i;
        -- A user block runs to its end row.
        loop
            v_i := v_i + 1;
            exit when v_i > v_n or agentmem_private.try_jsonb(import_tenant.lines[v_i - 1]) ->> 'type' = 'end';
        end loop;
        v_one := agentmem_private.import_user_lines(import_tenant.tenant_id, import_tenant.lines[v_start:v_i - 1]);
        v_users := v_users + 1;
        for v_key in select pg_catalog.jsonb_object_keys(v_one) loop
            v_count := v_count || pg_catalog.jsonb_build_object(
                v_key, coalesce((v_count ->> v_key)::bigint, 0) + (v_one ->> v_key)::bigint
            );
        end loop;
    end loop;
    v_count := v_count || pg_catalog.jsonb_build_object('users', v_users);
    perform agentmem_private.access_receipt(import_tenant.tenant_id, 'import_tenant', v_count);
    return v_count;
end
$$;

comment on function agentmem.import_tenant(text, text[]) is
'Import a tenant export (export_tenant) into tenant_id of this database (DBA only: security invoker, not granted to agentmem_app; a superuser or BYPASSRLS role, AM041 otherwise).
lines: the whole file,
or whole user blocks of it (agentmem import --tenant sends one block per call in one transaction, so
that memory holds one user at a time). Each user block is checked and imported as import_user does,
with the same refusals; all or nothing within the caller''s transaction. Returns rows inserted per
table and users, and leaves a receipt in agentmem.access_log (kind import_tenant).
Called by: the DBA (granted to no role).';

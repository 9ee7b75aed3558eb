-- 0014 event time: when a message happened (occurred_at), beside when it was
-- stored (created_at). Existing messages happened when they were stored.
-- message_embeddings carries a copy, as it carries user_id and conversation_id,
-- so that a time-bounded vector search filters without a join; a B-tree on
-- (tenant_id, user_id, model, occurred_at) counts a window's candidates and
-- one on messages (tenant_id, user_id, occurred_at) serves the words branch
-- and time-bounded listings.

alter table agentmem.messages add column occurred_at timestamptz;
update agentmem.messages set occurred_at = created_at;
alter table agentmem.messages alter column occurred_at set default now();
alter table agentmem.messages alter column occurred_at set not null;
alter table agentmem.messages
add constraint messages_occurred_at_ck check (occurred_at > '-infinity' and occurred_at < 'infinity');

comment on column agentmem.messages.occurred_at is
'When the message happened (given by the caller for imported history, else when it was stored): '
'what since/until of searches bound and what results report. created_at is when agentmem stored it.';

create index messages_user_occurred_idx on agentmem.messages (tenant_id, user_id, occurred_at);

alter table agentmem.message_embeddings add column occurred_at timestamptz;
update agentmem.message_embeddings as e
set occurred_at = m.occurred_at
from agentmem.messages as m
where m.tenant_id = e.tenant_id and m.message_id = e.message_id;
update agentmem.message_embeddings set occurred_at = created_at
where occurred_at is null;
alter table agentmem.message_embeddings alter column occurred_at set default now();
alter table agentmem.message_embeddings alter column occurred_at set not null;

comment on column agentmem.message_embeddings.occurred_at is
'A copy of messages.occurred_at, so that a time-bounded vector search filters without a join.';

create index message_embeddings_occurred_idx on agentmem.message_embeddings (tenant_id, user_id, model, occurred_at);

alter type agentmem.message_row add attribute occurred_at timestamptz;
alter type agentmem.message_hit add attribute occurred_at timestamptz;
alter type agentmem.message_in_window add attribute occurred_at timestamptz;

-- Facts true for a while: valid_from / valid_to, when a fact was true in the
-- world (valid_to NULL: still true), beside when agentmem recorded and
-- replaced it. A current fact is valid from its last replacement (else its
-- creation); a replaced version from when it was recorded to when it was
-- replaced. The versions of one fact (one user's subject slot) never overlap:
-- an exclusion constraint over its history, with tenant_id (Citus) and
-- btree_gist for the equality of text and uuid in a GiST index.
create extension if not exists btree_gist;

alter table agentmem.facts add column valid_from timestamptz, add column valid_to timestamptz;
update agentmem.facts as f
set valid_from = coalesce(
    (
        select max(h.replaced_at) from agentmem.fact_history as h
        where h.tenant_id = f.tenant_id and h.fact_id = f.fact_id
    ),
    f.created_at
);
alter table agentmem.facts alter column valid_from set default now();
alter table agentmem.facts alter column valid_from set not null;
alter table agentmem.facts
add constraint facts_validity_ck check (
    valid_from > '-infinity' and valid_from < 'infinity' and (valid_to is null or (valid_to > valid_from and valid_to < 'infinity'))
);

comment on column agentmem.facts.valid_from is
'When the fact became true in the world (given by the caller or extraction, else the time of its latest source message, else when it was stored).';
comment on column agentmem.facts.valid_to is
'When it stopped being true (exclusive); NULL while it still is.';

alter table agentmem.fact_history add column recorded_at timestamptz, add column valid_to timestamptz;
update agentmem.fact_history set recorded_at = valid_from, valid_to = replaced_at;
alter table agentmem.fact_history alter column recorded_at set not null;
alter table agentmem.fact_history alter column valid_to set not null;
alter table agentmem.fact_history
add constraint fact_history_validity_ck check (valid_to > valid_from);
alter table agentmem.fact_history
add constraint fact_history_no_overlap exclude using gist (
    tenant_id with =, fact_id with =, tstzrange(valid_from, valid_to) with &&
) where (change = 'replaced');

comment on column agentmem.fact_history.valid_from is
'When this version became true in the world.';
comment on column agentmem.fact_history.valid_to is
'When it stopped being true (exclusive): where the version that replaced it begins, or earlier. '
'A corrected version (change = corrected: it was never true) keeps the period it claimed, and only '
'replaced versions'' periods are kept from overlapping.';
comment on column agentmem.fact_history.recorded_at is
'When agentmem recorded this version (replaced_at: when it recorded the one that replaced it).';

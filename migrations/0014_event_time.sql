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

-- Whether this installation is distributed on Citus: read by the files after
-- this one (tenant indexes, the embedding queue, retention, index upkeep)
-- before sql/85_distribute.sql, which distributes it.

create or replace function agentmem.is_distributed()
returns boolean
language plpgsql
stable
security invoker
set search_path from current
as $$
declare
    v_distributed boolean;
begin
    if to_regclass('pg_catalog.pg_dist_partition') is null then
        return false;
    end if;
    execute 'select exists (select from pg_catalog.pg_dist_partition where logicalrelid = $1)'
    into v_distributed
    using 'agentmem.conversations'::regclass;
    return v_distributed;
end
$$;

comment on function agentmem.is_distributed() is
'True when this installation is distributed on Citus (agentmem.distribute() has run), false otherwise, also where Citus is not installed.
Called by: the DBA (granted to no role).';

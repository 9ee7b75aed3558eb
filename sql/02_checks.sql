-- Argument checks every feature shares: one rule for a user id, a text, a
-- metadata object and an integer range, with the same errors everywhere
-- (AM020 for a missing or out-of-range value, AM021 for one too large).

create or replace function agentmem_private.check_text(p_what text, p_value text, p_max int)
returns void
language plpgsql
immutable
security invoker
set search_path from current
as $$
begin
    if p_value is null or btrim(p_value) = '' then
        raise exception '% must be a non-empty text', p_what
        using
            errcode = 'AM020',
            hint = 'Pass the text itself; NULL, empty and blank texts are refused.';
    end if;
    if length(p_value) > p_max then
        raise exception '% is too large: % characters, the limit is %', p_what, length(p_value), p_max
        using
            errcode = 'AM021',
            hint = 'Split the text or store a shorter version of it.';
    end if;
end
$$;

comment on function agentmem_private.check_text(text, text, int) is
'Internal: AM020 for a NULL or blank text, AM021 for one longer than p_max characters.';

create or replace function agentmem_private.check_user_id(p_user_id text)
returns void
language plpgsql
immutable
security invoker
set search_path from current
as $$
begin
    if p_user_id is null or btrim(p_user_id) = '' or length(p_user_id) > 256 then
        raise exception 'user_id must be a text of 1 to 256 characters, not blank'
        using
            errcode = 'AM020',
            hint = 'Pass the id your application knows the user by.';
    end if;
end
$$;

comment on function agentmem_private.check_user_id(text) is
'Internal: AM020 unless user_id has 1 to 256 characters and is not blank.';

create or replace function agentmem_private.check_metadata(p_what text, p_metadata jsonb)
returns jsonb
language plpgsql
immutable
security invoker
set search_path from current
as $$
begin
    if p_metadata is null then
        return '{}'::jsonb;
    end if;
    if jsonb_typeof(p_metadata) <> 'object' then
        raise exception '% must be a JSON object, not %', p_what, jsonb_typeof(p_metadata)
        using errcode = 'AM020', hint = 'Pass e.g. ''{"source": "import"}''::jsonb.';
    end if;
    if length(p_metadata::text) > 100000 then
        raise exception '% is too large: % characters, the limit is 100000', p_what, length(p_metadata::text)
        using errcode = 'AM021', hint = 'Keep large payloads outside agentmem and store a reference.';
    end if;
    return p_metadata;
end
$$;

comment on function agentmem_private.check_metadata(text, jsonb) is
'Internal: NULL becomes {}; AM020 unless a JSON object, AM021 above 100,000 characters.';

create or replace function agentmem_private.check_range(p_what text, p_value int, p_min int, p_max int)
returns void
language plpgsql
immutable
security invoker
set search_path from current
as $$
begin
    if p_value is null or p_value not between p_min and p_max then
        raise exception '% must be between % and %, got %', p_what, p_min, p_max, coalesce(p_value::text, 'NULL')
        using errcode = 'AM020';
    end if;
end
$$;

comment on function agentmem_private.check_range(text, int, int, int) is
'Internal: AM020 unless p_min <= p_value <= p_max.';

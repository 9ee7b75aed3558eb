-- Argument checks every feature shares: one rule for a user id, a text, a
-- metadata object, an array and an integer range, with the same errors
-- everywhere (AM020 for a missing or out-of-range value, AM021 for one too
-- large). Blank means nothing but whitespace of any kind (spaces, tabs,
-- newlines, carriage returns, form feeds, vertical tabs).

create or replace function agentmem_private.is_blank(p_value text)
returns boolean
language sql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- Unicode's whitespace as well (agentmem_private.unicode_space), whatever the locale.
    select
        p_value is null
        or p_value !~ '[^\u0009-\u000d\u0020\u0085\u00a0\u1680\u180e\u2000-\u200d\u2028\u2029\u202f\u205f\u2060\u3000\ufeff[:space:]]'
$$;

comment on function agentmem_private.is_blank(text) is
'Internal: true for NULL and for a text of nothing but whitespace of any kind (spaces, tabs, newlines, any
[[:space:]], and Unicode''s: no-break, ideographic, line separator, zero-width, ...).';

create or replace function agentmem_private.check_text(p_what text, p_value text, p_max int)
returns void
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if agentmem_private.is_blank(p_value) then
        raise exception '% must be a non-empty text', p_what
        using
            errcode = 'AM020',
            hint = 'Pass the text itself; NULL, empty and blank (whitespace only) texts are refused.';
    end if;
    if pg_catalog.length(p_value) > p_max then
        raise exception '% is too large: % characters, the limit is %', p_what, pg_catalog.length(p_value), p_max
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
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if pg_catalog.length(p_user_id) > 256 or agentmem_private.is_blank(p_user_id) then
        raise exception 'user_id must be a text of 1 to 256 characters, not blank'
        using
            errcode = 'AM020',
            hint = 'Pass the id your application knows the user by.';
    end if;
end
$$;

comment on function agentmem_private.check_user_id(text) is
'Internal: AM020 unless user_id has 1 to 256 characters and is not blank (whitespace only). '
'The one rule for a user id, in every function that takes one.';

create or replace function agentmem_private.check_metadata(p_what text, p_metadata jsonb)
returns jsonb
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_text text;
begin
    if p_metadata is null then
        return '{}'::jsonb;
    end if;
    if pg_catalog.jsonb_typeof(p_metadata) <> 'object' then
        raise exception '% must be a JSON object, not %', p_what, pg_catalog.jsonb_typeof(p_metadata)
        using errcode = 'AM020', hint = 'Pass e.g. ''{"source": "import"}''::jsonb.';
    end if;
    v_text := p_metadata::text;
    if pg_catalog.length(v_text) > 100000 then
        raise exception '% is too large: % characters, the limit is 100000', p_what, pg_catalog.length(v_text)
        using errcode = 'AM021', hint = 'Keep large payloads outside agentmem and store a reference.';
    end if;
    -- Depth: each level opens with a { or a [, so a text holding at most 32
    -- of them (inside strings too: counted, never missed) is at most 32 deep,
    -- and the walk below is skipped (what nearly every message's metadata is).
    if pg_catalog.length(v_text) - pg_catalog.length(pg_catalog.translate(v_text, '{[', '')) <= 32 then
        return p_metadata;
    end if;
    -- Otherwise a walk that never goes below level 33, so at most 100,000
    -- characters times 33 levels are read whatever the input.
    if exists (
        with recursive walk (v, depth) as (
            select p_metadata, 1
            union all
            select c.v, w.depth + 1
            from walk as w
            cross join lateral (
                select e.value as v from pg_catalog.jsonb_each(case when pg_catalog.jsonb_typeof(w.v) = 'object' then w.v end) as e
                union all
                select a.value from pg_catalog.jsonb_array_elements(case when pg_catalog.jsonb_typeof(w.v) = 'array' then w.v end) as a
            ) as c
            where w.depth <= 32 and pg_catalog.jsonb_typeof(c.v) in ('object', 'array')
        )

        select from walk where walk.depth > 32
    ) then
        raise exception '% is nested too deeply: the limit is 32 levels of objects and arrays', p_what
        using errcode = 'AM020', hint = 'Flatten the metadata; keep deep documents outside agentmem.';
    end if;
    return p_metadata;
end
$$;

comment on function agentmem_private.check_metadata(text, jsonb) is
'Internal: NULL becomes {}; AM020 unless a JSON object nested at most 32 levels deep (objects and arrays),
AM021 above 100,000 characters.';

create or replace function agentmem_private.check_array(p_what text, p_value anyarray, p_max int)
returns int
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if p_value is null then
        return 0;
    end if;
    -- An empty array has no dimension; any other must be one-dimensional and
    -- start at 1, so that element i is the i-th one read by unnest.
    if pg_catalog.cardinality(p_value) > 0 and (pg_catalog.array_ndims(p_value) <> 1 or pg_catalog.array_lower(p_value, 1) <> 1) then
        raise exception '% must be a one-dimensional array starting at index 1', p_what
        using
            errcode = 'AM020',
            detail = pg_catalog.format('Got %s dimension(s), bounds %s.', pg_catalog.array_ndims(p_value), pg_catalog.array_dims(p_value)),
            hint = 'Pass a plain array such as ARRAY[...] or ''{...}''.';
    end if;
    if pg_catalog.cardinality(p_value) > p_max then
        raise exception '% holds % elements; the limit is %', p_what, pg_catalog.cardinality(p_value), p_max
        using errcode = 'AM020', hint = 'Split the call into several.';
    end if;
    return pg_catalog.cardinality(p_value);
end
$$;

comment on function agentmem_private.check_array(text, anyarray, int) is
'Internal: AM020 unless the array is NULL, empty, or one-dimensional with lower bound 1 and at most
p_max elements; returns its length (0 for NULL). Every function that takes an array calls it first.';

create or replace function agentmem_private.check_range(p_what text, p_value int, p_min int, p_max int)
returns void
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if p_value is null or p_value not between p_min and p_max then
        raise exception '% must be between % and %, got %', p_what, p_min, p_max, coalesce(p_value::text, 'NULL')
        using
            errcode = 'AM020',
            detail = pg_catalog.format('%s is an integer from %s to %s; NULL is not one.', p_what, p_min, p_max),
            hint = pg_catalog.format('Pass %s => a value from %s to %s.', p_what, p_min, p_max);
    end if;
end
$$;

comment on function agentmem_private.check_range(text, int, int, int) is
'Internal: AM020 (with DETAIL and HINT) unless p_min <= p_value <= p_max.';

create or replace function agentmem_private.check_similarity(p_what text, p_value double precision)
returns void
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    -- 'NaN' between -1 and 1 is false, but NaN >= x is true in PostgreSQL:
    -- a NaN threshold would count every row, so it is named here.
    if p_value is null or p_value = 'NaN' or p_value not between -1 and 1 then
        raise exception '% must be a cosine similarity between -1 and 1, got %', p_what, coalesce(p_value::text, 'NULL')
        using errcode = 'AM020', hint = 'NaN and infinities are refused.';
    end if;
end
$$;

comment on function agentmem_private.check_similarity(text, double precision) is
'Internal: AM020 unless -1 <= p_value <= 1 (NULL and NaN refused).';

-- An id argument of the API (conversation_id, message_id, ...) is declared
-- anycompatible, not uuid: a uuid parameter is cast before the function runs,
-- so a malformed id from psql, a driver's untyped or text parameter would fail
-- with a bare 22P02 naming no argument. anycompatible takes a uuid as it is
-- (typed parameters, ids returned by the API) and text of any kind (an untyped
-- literal resolves to text); this turns it into the uuid, or AM020.
create or replace function agentmem_private.uuid_arg(p_what text, p_value anycompatible)
returns uuid
language plpgsql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if p_value is null then
        return null;
    end if;
    if pg_catalog.pg_typeof(p_value) = 'uuid'::regtype then
        return p_value::text::uuid;
    end if;
    begin
        return p_value::text::uuid;
    exception when invalid_text_representation then
        raise exception '% is not a UUID: %', p_what, pg_catalog.quote_literal(pg_catalog.left(p_value::text, 100))
        using
            errcode = 'AM020',
            detail = pg_catalog.format('The value is of type %s.', pg_catalog.pg_typeof(p_value)),
            hint = 'Pass the id as an agentmem function returned it: 32 hexadecimal digits, '
            || 'e.g. ''0b6e5a6c-0c1a-4a8e-9f3e-1d2c3b4a5f60''.';
    end;
end
$$;

comment on function agentmem_private.uuid_arg(text, anycompatible) is
'Internal: the uuid an id argument holds (a uuid, or its text form), NULL for NULL; AM020 naming the '
'argument for anything else.';

create or replace function agentmem_private.check_window(p_since timestamptz, p_until timestamptz)
returns void
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if p_since > p_until then
        raise exception 'since (%) is after until (%)', p_since, p_until
        using
            errcode = 'AM020',
            detail = 'A time window holds the times t with since <= t < until.',
            hint = 'Pass the earlier time as since; either may be NULL for no bound on that side.';
    end if;
end
$$;

comment on function agentmem_private.check_window(timestamptz, timestamptz) is
'Internal: AM020 when a time window''s since is after its until (either NULL: unbounded on that side).';

create or replace function agentmem_private.check_half_life(p_half_life interval)
returns float8
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_seconds float8 := extract(epoch from p_half_life)::float8;
begin
    if p_half_life is not null and (not pg_catalog.isfinite(p_half_life) or v_seconds <= 0) then
        raise exception 'recency_half_life must be a positive interval, got %', p_half_life
        using
            errcode = 'AM020',
            hint = 'e.g. recency_half_life => interval ''30 days''; NULL (the default) weighs no age.';
    end if;
    return v_seconds;
end
$$;

comment on function agentmem_private.check_half_life(interval) is
'Internal: AM020 unless a recency half-life is NULL or a positive, finite interval; returns it in
seconds (NULL for NULL).';

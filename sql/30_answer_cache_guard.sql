-- Answer cache, text functions: the normalised question (the exact key), the
-- guard features two questions must share for a semantic hit, and the markers
-- that make an answer look personalised. All immutable: they read only text.
--
-- Limits, so that no call reads without bound:
--   question (the exact path)                         4 MiB (AM021); normalised up to 16 kB, past it
--                                                      the question is its own key (byte-exact match)
--   question (the guard, the semantic path)           16 kB = 16,384 bytes: question_guard_features and
--                                                      question_guard_agrees refuse more (AM021);
--                                                      cache_lookup serves a longer question from an
--                                                      exact match only, and never offers a cached
--                                                      question that long as a semantic candidate
--   personal markers                                   the first 16,384 characters of the question are
--                                                      searched, for at most 1,000 distinct markers

create or replace function agentmem_private.guard_max_bytes()
returns int
language sql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select 16384
$$;

comment on function agentmem_private.guard_max_bytes() is
'Internal: the longest question (in bytes, 16 kB) the guard reads; longer ones are served by exact match only.';

create or replace function agentmem_private.check_guard_question(p_what text, p_question text)
returns void
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if pg_catalog.octet_length(p_question) > agentmem_private.guard_max_bytes() then
        raise exception '% is % bytes; the guard reads questions of up to % bytes',
            p_what, pg_catalog.octet_length(p_question), agentmem_private.guard_max_bytes()
        using
            errcode = 'AM021',
            hint = 'Longer questions are served from exact matches only (cache_lookup does so by itself).';
    end if;
end
$$;

comment on function agentmem_private.check_guard_question(text, text) is
'Internal: AM021 for a question over guard_max_bytes() (16 kB).';

create or replace function agentmem.normalize_question(question text)
returns text
language plpgsql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if pg_catalog.octet_length(question) > 4194304 then
        raise exception 'question is % bytes; the cache accepts up to 4 MiB', pg_catalog.octet_length(question)
        using errcode = 'AM021', hint = 'Questions that long are not worth caching.';
    end if;
    -- Normalising runs four regular expressions whose cost grows with the
    -- text (6 s for 4 MiB): past the guard's limit (16384 bytes, as
    -- agentmem_private.guard_max_bytes(), which this security invoker function
    -- cannot call as the application role) a question is its own key.
    if pg_catalog.octet_length(question) > 16384 then
        return question;
    end if;
    return pg_catalog.btrim(pg_catalog.regexp_replace(
        pg_catalog.regexp_replace(
            pg_catalog.regexp_replace(
                pg_catalog.regexp_replace(pg_catalog.lower(question), '([[:alpha:]])[''’]([[:alpha:]])', '\1\2', 'g'),
                '([$€£¥%])', ' \1 ', 'g'
            ),
            '[^[:alnum:][:space:]$€£¥%]+', ' ', 'g'
        ),
        '[[:space:]]+', ' ', 'g'
    ));
end
$$;

comment on function agentmem.normalize_question(text) is
'The normalised form of a question, the exact-match key of the answer cache.
Lower case; apostrophes inside words dropped (what''s = whats); currency signs and % kept as words;
other punctuation becomes a blank (so 3.5 and 35 stay different); whitespace collapsed and trimmed.
question: at most 4 MiB (AM021), the answer cache''s limit. A question over 16 kB (16,384 bytes) is
returned unchanged: it is matched byte for byte, never normalised nor semantically.
Called by: the application (agentmem_app).';

create or replace function agentmem_private.guard_tokens(question text)
returns text[]
language plpgsql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    -- PL/pgSQL, not SQL: an SQL function with a SET clause is planned at every
    -- call (cache_lookup calls this for the question and each candidate).
    return (
        pg_catalog.regexp_split_to_array(pg_catalog.btrim(pg_catalog.regexp_replace(
            pg_catalog.regexp_replace(
                pg_catalog.regexp_replace(
                    pg_catalog.regexp_replace(
                        pg_catalog.regexp_replace(
                            pg_catalog.regexp_replace(
                                pg_catalog.regexp_replace(
                                    pg_catalog.regexp_replace(
                                        pg_catalog.replace(pg_catalog.lower(question), '’', ''''),
                                        -- enumeration markers opening list items: "1)", "(2)", "a)", "(b)"
                                        '(^|[[:space:]:;,])[(]?([0-9]{1,2}|[a-z])[)](?=[[:space:]]|$)', '\1 ', 'g'
                                    ),
                                    -- and "1." / "2." at the start of a line or after a colon or semicolon
                                    '(^|\n|[:;])[[:space:]]*[0-9]{1,2}[.](?=[[:space:]])', '\1 ', 'g'
                                ),
                                -- contractions: can't, won't, isn't ... read as "not"
                                'n''t\M', ' not', 'g'
                            ),
                            -- thousands separators and decimal points between digits survive tokenising
                            '([0-9]),([0-9]{3})', '\1\2', 'g'
                        ),
                        '([0-9]),([0-9]{3})', '\1\2', 'g'
                    ),
                    '([0-9])[.]([0-9])', '\1d\2', 'g'
                ),
                '([$€£¥%])', ' \1 ', 'g'
            ),
            '[^a-z0-9$€£¥%]+', ' ', 'g'
        )), ' ')
    );
end
$$;

comment on function agentmem_private.guard_tokens(text) is
'Internal: the words question_guard_features reads. Lower case; n''t becomes "not"; enumeration markers
opening list items ("1)", "(2)", "a)", and "1." at the start of a line or after a colon) are dropped, so
a numbered list does not read as numbers; 1,000 = 1000; 3.5 becomes 3d5; currency signs and % are words.';

create or replace function agentmem_private.guard_number_features(p_tokens text[])
returns text[]
language plpgsql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tokens text[] := p_tokens || array['']::text[];   -- sentinel: ends a trailing number phrase
    v_out text[] := '{}';
    v_tok text;
    v_prev text := '';
    v_next text;
    v_next2 text;
    v_i int;
    v_val numeric;
    v_cur numeric;           -- the number phrase being read (words and digits)
    v_total numeric := 0;
    v_in_number boolean := false;
    v_units constant text[] := array[
        'zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten',
        'eleven', 'twelve', 'thirteen', 'fourteen', 'fifteen', 'sixteen', 'seventeen', 'eighteen',
        'nineteen'
    ];
    v_tens constant text[] := array[
        'twenty', 'thirty', 'forty', 'fifty', 'sixty', 'seventy', 'eighty', 'ninety'
    ];
begin
    for v_i in 1 .. pg_catalog.cardinality(v_tokens) loop
        v_tok := v_tokens[v_i];
        v_next := coalesce(v_tokens[v_i + 1], '');
        v_next2 := coalesce(v_tokens[v_i + 2], '');
        v_val := null;
        -- digits, decimals (3d5 = 3.5), digits glued to a word (30days, 5pm, 1st)
        if v_tok ~ '^\d+(d\d+)?$' then
            v_val := pg_catalog.replace(v_tok, 'd', '.')::numeric;
        elsif v_tok ~ '^\d+(st|nd|rd|th)$' then
            v_out := v_out || ('ord:' || (substring(v_tok from '^\d+'))::numeric::text);
        elsif v_tok ~ '^\d+[a-z]+$' then
            v_val := substring(v_tok from '^\d+')::numeric;
            v_tok := substring(v_tok from '[a-z]+$');
            if v_tok = 'k' then
                v_val := v_val * 1000;
            end if;
        elsif v_tok = any(v_units) then
            v_val := pg_catalog.array_position(v_units, v_tok) - 1;
        elsif v_tok = any(v_tens) then
            v_val := (pg_catalog.array_position(v_tens, v_tok) + 1) * 10;
        end if;
        if v_tok = 'one' and (
            v_prev in (
                'which', 'the', 'this', 'that', 'every', 'any', 'no', 'each', 'some', 'does', 'do', 'can',
                'should', 'would', 'could', 'will', 'must', 'might', 'if', 'how', 'what', 'where', 'when',
                'why', 'someone', 'anyone', 'no', 'favorite', 'favourite', 'best', 'good', 'right', 'new'
            )
            or v_next in ('of', 'day', 'can', 'should', 'must', 'could', 'would', 'will', 'may', 'do', 'does',
                'is', 'has', 'have', 'get', 'become', 'make', 'find', 'learn', 'another', 'or', '')
        ) then
            v_val := null;          -- "which one", "how does one", "one of": a pronoun, not the number
        end if;
        -- read number phrases: twenty five = 25, two hundred = 200, 5 million = 5000000
        if v_val is not null then
            if v_in_number and v_cur is not null and v_cur >= 20 and v_cur % 10 = 0 and v_val < 10
                and v_tok !~ '^\d' then
                v_cur := v_cur + v_val;
            else
                if v_in_number and v_cur is not null then
                    v_out := v_out || ('num:' || pg_catalog.trim_scale(v_total + v_cur)::text);
                    v_total := 0;
                end if;
                v_cur := v_val;
            end if;
            v_in_number := true;
        elsif v_tok in ('hundred', 'thousand', 'million', 'billion', 'k') and (v_in_number or v_tok <> 'k') then
            v_cur := coalesce(v_cur, 1);
            if v_tok = 'hundred' then
                v_cur := v_cur * 100;
            else
                v_total := v_total + v_cur * case v_tok when 'thousand' then 1000 when 'k' then 1000
                    when 'million' then 1000000 else 1000000000 end;
                v_cur := 0;
            end if;
            v_in_number := true;
        else
            if v_in_number then
                v_out := v_out || ('num:' || pg_catalog.trim_scale(v_total + coalesce(v_cur, 0))::text);
                v_total := 0;
                v_cur := null;
                v_in_number := false;
            end if;
        end if;
        v_prev := v_tok;
    end loop;
    return v_out;
end
$$;

comment on function agentmem_private.guard_number_features(text[]) is
'Internal: the numbers of guard_features: number phrases in words and digits (twenty five, 5 '
'million, 30days, 5k, 3d5 = 3.5) as num:N, ordinals in digits (1st) as ord:N; one (a pronoun) is no number.';

-- Over 100 lines: one pass over the tokens whose bulk is the words a paraphrase must keep, written in its
--   branches (the vocabulary is data); the negation's scope reads the tokens after the current one.
create or replace function agentmem_private.guard_word_features(p_tokens text[])
returns text[]
language plpgsql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tokens text[] := p_tokens || array['']::text[];   -- sentinel: ends a trailing number phrase
    v_out text[] := '{}';
    v_tok text;
    v_prev text := '';
    v_next text;
    v_next2 text;
    v_i int;
    v_j int;
    v_negs int := 0;             -- negations read
    v_ordinals constant text[] := array[
        'first', 'second', 'third', 'fourth', 'fifth', 'sixth', 'seventh', 'eighth', 'ninth', 'tenth',
        'eleventh', 'twelfth', 'thirteenth', 'fourteenth', 'fifteenth', 'sixteenth', 'seventeenth',
        'eighteenth', 'nineteenth', 'twentieth'
    ];
    v_months constant text[] := array[
        'january', 'february', 'march', 'april', 'may', 'june', 'july', 'august', 'september',
        'october', 'november', 'december'
    ];
begin
    for v_i in 1 .. pg_catalog.cardinality(v_tokens) loop
        v_tok := v_tokens[v_i];
        v_next := coalesce(v_tokens[v_i + 1], '');
        v_next2 := coalesce(v_tokens[v_i + 2], '');
        -- a word glued to digits is read as the word (30days: days), as guard_number_features reads it
        if v_tok ~ '^\d+[a-z]+$' and v_tok !~ '^\d+(st|nd|rd|th)$' then
            v_tok := substring(v_tok from '[a-z]+$');
        end if;
        -- words with a meaning a paraphrase must keep
        if v_tok = any(v_ordinals) then
            v_out := v_out || ('ord:' || pg_catalog.array_position(v_ordinals, v_tok)::text);
        elsif v_tok in ('$', 'dollar', 'dollars', 'usd', 'bucks') then
            v_out := v_out || 'cur:usd'::text;
        elsif v_tok in ('€', 'euro', 'euros', 'eur') then
            v_out := v_out || 'cur:eur'::text;
        elsif v_tok in ('£', 'pound', 'pounds', 'gbp', 'sterling') then
            v_out := v_out || 'cur:gbp'::text;
        elsif v_tok in ('¥', 'yen', 'jpy', 'yuan', 'rmb') then
            v_out := v_out || 'cur:yen'::text;
        elsif v_tok in ('rupee', 'rupees', 'inr', 'rs') then
            v_out := v_out || 'cur:inr'::text;
        elsif v_tok in ('%', 'percent', 'percentage') then
            v_out := v_out || 'pct'::text;
        elsif v_tok = any(v_months) and not (v_tok = 'may' and v_prev !~ '^\d+$' and v_prev <> 'of') then
            v_out := v_out || ('month:' || pg_catalog.array_position(v_months, v_tok)::text);
        elsif v_tok in ('today', 'tonight', 'tomorrow', 'yesterday') then
            v_out := v_out || ('day:' || v_tok);
        elsif v_tok in (
            'not', 'no', 'never', 'none', 'nobody', 'nothing', 'neither', 'nor', 'nowhere', 'without',
            'cannot', 'dont', 'doesnt', 'didnt', 'isnt', 'arent', 'wasnt', 'werent', 'cant', 'couldnt',
            'shouldnt', 'wouldnt', 'havent', 'hasnt', 'hadnt', 'aint', 'mustnt', 'neednt', 'wont',
            'absence', 'absent', 'lack', 'lacks', 'lacking'
        ) then
            if not (v_prev = 'or' and v_tok in ('not', 'no')) then      -- "... or not?" asks, not negates
                v_out := v_out || 'neg'::text;
                v_negs := v_negs + 1;
            end if;
            -- the scope of not/never: what is negated (not on Friday <> not on Saturday). A negated
            -- determiner (no X, not a X, not any X) denies that X exists, wherever the sentence puts
            -- it ("no X is mentioned" = "it does not mention any X"): polarity only, like none or without
            if v_tok not in (
                'no', 'none', 'nobody', 'nothing', 'neither', 'nor', 'nowhere', 'without',
                'absence', 'absent', 'lack', 'lacks', 'lacking'
            ) and not (v_prev = 'or' and v_tok = 'not') and v_next not in ('a', 'an', 'any') then
                v_j := v_i + 1;
                while v_tokens[v_j] in ('a', 'an', 'the', 'to', 'be', 'been', 'on', 'in', 'at', 'of', 'by')
                    loop
                    v_j := v_j + 1;
                end loop;
                if coalesce(v_tokens[v_j], '') <> '' then
                    v_out := v_out || ('neg:' || v_tokens[v_j]);
                end if;
            end if;
        elsif v_tok = 'all' and (v_prev in ('of', 'at') or v_next = 'time' or (v_next = 'the' and v_next2 = 'time'))
            then
            null;                   -- "of all time", "at all", "all the time": emphasis, not a quantifier
        elsif v_tok in ('every', 'each') and v_next = 'time' then
            null;                   -- "every time", "each time": when, not how many
        elsif v_tok in ('all', 'every', 'everyone', 'everybody', 'everything', 'each') then
            v_out := v_out || 'q:all'::text;
        elsif v_tok in ('most', 'majority') and v_prev not in (
            'the', 'is', 'are', 'was', 'which', 'what', 'my', 'your', 'his', 'her', 'their', 'our', 'its'
        ) then
            v_out := v_out || 'q:most'::text;
        elsif v_tok in ('few', 'fewer') and v_prev not in ('a', 'the') then
            v_out := v_out || 'q:few'::text;
        elsif v_tok = 'many' and v_prev <> 'how' then
            v_out := v_out || 'q:many'::text;
        elsif v_tok in ('only', 'solely') then
            v_out := v_out || 'q:only'::text;
        elsif v_tok in ('always', 'forever') then
            v_out := v_out || 'q:always'::text;
        elsif v_tok in ('sometimes', 'occasionally') then
            v_out := v_out || 'q:sometimes'::text;
        elsif v_tok in ('rarely', 'seldom') then
            v_out := v_out || 'q:rarely'::text;
        elsif v_tok in ('before', 'until', 'till', 'prior') and v_next <> '' then
            v_out := v_out || 'time:before'::text;
        elsif v_tok in ('after', 'since') and v_next <> '' then
            v_out := v_out || 'time:after'::text;
        end if;
        v_prev := v_tok;
    end loop;
    if v_negs > 0 and v_negs % 2 = 0 then
        v_out := v_out || 'neg2'::text;
    end if;
    return v_out;
end
$$;

comment on function agentmem_private.guard_word_features(text[]) is
'Internal: the words of guard_features a paraphrase must keep: ordinals, currencies, percent, months, days, '
'negations and their scope (neg, neg:WORD, neg2 for an even number), quantifiers, before and after.';

create or replace function agentmem_private.guard_features(p_tokens text[])
returns text[]
language sql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- null for null tokens, as each step returns
    select case when p_tokens is not null then array(
        select distinct f
        from pg_catalog.unnest(
            agentmem_private.guard_number_features(p_tokens) || agentmem_private.guard_word_features(p_tokens)
        ) as f
        order by f
    ) end
$$;

comment on function agentmem_private.guard_features(text[]) is
'Internal: question_guard_features of a question already split by _guard_tokens, so that a caller that
also needs the tokens splits the question once.';

create or replace function agentmem.question_guard_features(question text)
returns text[]
language plpgsql
immutable
parallel safe
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    perform agentmem_private.check_guard_question('question', question_guard_features.question);
    return agentmem_private.guard_features(agentmem_private.guard_tokens(question_guard_features.question));
end
$$;

comment on function agentmem.question_guard_features(text) is
'The features two questions must share for a semantic cache hit: numbers, dates, amounts, negation, quantifiers.
A sorted set of tags: num:N for digits and number words alike (two = 2, twenty-five = 25, 5k = 5000,
3.5 = 3.5; enumeration markers such as "1)" or "(a)" opening list items are not numbers), ord:N
(2nd = second), cur:usd/eur/gbp/yen/inr ($, dollars), pct, month:N, day:today...,
neg when the question is negated (not, no, never, none, nobody, nothing, neither, nor, without, cannot,
every n''t contraction, absence, absent, lack), neg2 when it carries an even number of negations (a
second negation flips the polarity back), neg:WORD for the scope of not/never and the contractions (the
next content word; not after a negated determiner: no X, not a X, not any X deny that X exists, wherever
the sentence puts it), quantifiers q:all (all, every, each, everyone), q:most, q:few, q:many (not
"how many"), q:only, q:always, q:sometimes, q:rarely, and time:before / time:after.
"some" and "any" are not features: questions use them for politeness ("what are some ..."); nor is "both",
which restates a conjunction. Compare two questions with question_guard_agrees, which counts a neg:WORD
only where both questions use WORD. question: at most 16 kB (16,384 bytes, AM021); its cost is linear in it.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem_private.guard_agrees(p_fa text[], p_ta text[], p_fb text[], p_tb text[])
returns boolean
language plpgsql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    -- PL/pgSQL, not SQL: an SQL function with a SET clause is planned at every
    -- call (cache_lookup calls this for each candidate).
    return array(
        select x.tag from pg_catalog.unnest(p_fa) as x (tag)
        where x.tag !~ '^neg:' or pg_catalog.substr(x.tag, 5) = any(p_tb)
        order by x.tag
    )
    = array(
        select y.tag from pg_catalog.unnest(p_fb) as y (tag)
        where y.tag !~ '^neg:' or pg_catalog.substr(y.tag, 5) = any(p_ta)
        order by y.tag
    );
end
$$;

comment on function agentmem_private.guard_agrees(text[], text[], text[], text[]) is
'Internal: question_guard_agrees on features (question_guard_features) and tokens (_guard_tokens) already
computed, so that cache_lookup works out the asked question''s once for all its candidates.';

create or replace function agentmem.question_guard_agrees(question text, other_question text)
returns boolean
language plpgsql
immutable
parallel safe
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_ta text[];
    v_tb text[];
begin
    perform agentmem_private.check_guard_question('question', question_guard_agrees.question);
    perform agentmem_private.check_guard_question('other_question', question_guard_agrees.other_question);
    v_ta := agentmem_private.guard_tokens(question_guard_agrees.question);
    v_tb := agentmem_private.guard_tokens(question_guard_agrees.other_question);
    return agentmem_private.guard_agrees(
        agentmem_private.guard_features(v_ta), v_ta, agentmem_private.guard_features(v_tb), v_tb
    );
end
$$;

comment on function agentmem.question_guard_agrees(text, text) is
'Whether two questions pass the answer cache''s guard: the same question_guard_features, negation counted on shared words only.
The scope of a negation (neg:WORD) counts only for a word both questions use.
"not on Friday" against
"not on Saturday" differs (both name both days), while "not provided" against "not specified" is a
rewording the embedding judges: both are negated (neg), and neither names the other''s word.
NULL when either question is NULL. Each question: at most 16 kB (16,384 bytes, AM021).
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

-- The guard's stamp: a digest of the source of the functions that read a
-- question (guard_tokens, guard_number_features, guard_word_features,
-- guard_features), written into guard_version's body at every install. A
-- change to any of them (a word list, a rule) changes the stamp, and each
-- cached question's stored reading (cache_entries.guard_*) is worked out
-- again at its next lookup, or by refresh_cache_guards.
do $generate$
declare
    v_stamp text;
begin
    select pg_catalog.md5(pg_catalog.string_agg(p.proname || ':' || p.prosrc, '|' order by p.proname))
    into v_stamp
    from pg_catalog.pg_proc as p
    where p.oid in (
        'agentmem_private.guard_tokens(text)'::regprocedure,
        'agentmem_private.guard_number_features(text[])'::regprocedure,
        'agentmem_private.guard_word_features(text[])'::regprocedure,
        'agentmem_private.guard_features(text[])'::regprocedure
    );
    execute pg_catalog.format(
        $fn$
create or replace function agentmem_private.guard_version()
returns text
language plpgsql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $body$
begin
    return %L;
end
$body$
        $fn$,
        v_stamp
    );
end
$generate$;

comment on function agentmem_private.guard_version() is
'Internal: the stamp of the installed guard (an md5 of the source of the functions that read a question), '
'written at install; cache_entries.guard_version records the stamp of each stored reading.';

create or replace function agentmem_private.entry_guard(
    p_question text, out guard_version text, out guard_tokens text[], out guard_features text[]
)
language plpgsql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    -- A question over the guard's limit is never a semantic candidate: stamped, not read.
    entry_guard.guard_version := agentmem_private.guard_version();
    if pg_catalog.octet_length(p_question) <= agentmem_private.guard_max_bytes() then
        entry_guard.guard_tokens := agentmem_private.guard_tokens(p_question);
        entry_guard.guard_features := agentmem_private.guard_features(entry_guard.guard_tokens);
    end if;
end
$$;

comment on function agentmem_private.entry_guard(text) is
'Internal: the guard''s reading of a cached question, as cache_entries stores it: the stamp '
'(guard_version()), the words (guard_tokens) and the features (guard_features); NULL words and features '
'for a question over guard_max_bytes() (16 kB) or NULL.';

create or replace function agentmem_private.personal_markers(answer text, question text)
returns text[]
language plpgsql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    -- The question is read once, and no more of it than the guard reads.
    v_question text := pg_catalog.lower(pg_catalog.regexp_replace(pg_catalog.left(question, agentmem_private.guard_max_bytes()), '\s+', ' ', 'g'));
    v_markers text[];
    v_out text[] := '{}';
    v_marker text;
begin
    -- One pass over the answer for each kind of marker.
    select pg_catalog.array_agg(distinct a.marker order by a.marker) into v_markers
    from (
        select m[1] as marker
        from pg_catalog.regexp_matches(
            answer,
            '((?:[$€£¥]\s?\d[\d,.]*)|(?:\d[\d,.]*\s?(?:dollars?|euros?|pounds?|usd|eur|gbp)\M)'
            || '|(?:\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4})'
            || '|(?:\m(?:jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}\M)'
            || '|(?:\m\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\M))',
            'gi'
        ) as m
        union all
        select n[1]
        from pg_catalog.regexp_matches(answer, '(?:[^.!?:\n\s]\s+)([[:upper:]][[:lower:]]+)', 'g') as n
    ) as a;
    -- Each marker is searched in the (bounded) question: at most 1,000 of them,
    -- so the cost is bounded whatever the answer. An answer with more distinct
    -- names, dates and amounts than that counts as personalised.
    foreach v_marker in array coalesce(v_markers[1:1000], '{}') loop
        if position(pg_catalog.lower(pg_catalog.regexp_replace(v_marker, '\s+', ' ', 'g')) in v_question) = 0 then
            v_out := v_out || v_marker;
        end if;
    end loop;
    if pg_catalog.cardinality(v_out) = 0 and pg_catalog.cardinality(v_markers) > 1000 then
        v_out := array[pg_catalog.format('%s distinct names, dates and amounts', pg_catalog.cardinality(v_markers))];
    end if;
    return v_out;
end
$$;

comment on function agentmem_private.personal_markers(text, text) is
'Internal: what makes an answer look personalised: currency amounts, dates and capitalised names '
'(not at the start of a sentence) that the question does not contain. Linear in the answer: the '
'question is normalised once and read up to guard_max_bytes() characters; at most 1,000 distinct '
'markers are searched in it, and an answer with more counts as personalised.';

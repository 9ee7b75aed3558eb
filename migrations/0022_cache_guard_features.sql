-- 0022: the answer guard's reading of each cached question, stored with it.
--
-- A semantic lookup compares the asked question with each candidate through
-- the guard (its words and its features: numbers, dates, amounts, negation,
-- quantifiers). Worked out at every lookup for every candidate, that was
-- about 0.3 ms a question: a miss read six questions (the one asked and five
-- candidates). The candidate's reading is now worked out once, when the
-- answer is stored, and kept in these columns with the stamp of the guard
-- that produced it: a lookup uses the stored reading when its stamp is the
-- installed guard's, and works it out again (and stores it) when it is not
-- (NULL: an entry stored before this migration, or by an older guard).
-- Derived data: an export leaves the columns out and an import works them
-- out again.

alter table agentmem.cache_entries
add column guard_version text,
add column guard_tokens text[],
add column guard_features text[];

comment on column agentmem.cache_entries.guard_version is
'The stamp of the guard (agentmem_private.guard_version()) that read guard_tokens and guard_features; NULL: not read yet.';
comment on column agentmem.cache_entries.guard_tokens is
'The question''s words as the guard reads them (agentmem_private.guard_tokens); NULL for a question over the guard''s 16 kB.';
comment on column agentmem.cache_entries.guard_features is
'The question''s guard features (agentmem.question_guard_features); NULL for a question over the guard''s 16 kB.';

-- agentmem_private.vector_search takes its caller's row check (row_check, an SQL condition on the row)
-- instead of writing a fact's time window itself: the signature without it is dropped, and the
-- re-applied functions create the one with it.

drop function if exists agentmem_private.vector_search(
    text, text, text, int, vector, int, text, uuid, text, text, text, bigint, int, timestamptz, timestamptz
);

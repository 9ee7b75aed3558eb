-- 0018 signatures the definitions re-create differently:
-- delete_message, delete_fact and update_fact take their id as anycompatible
-- (a malformed id is AM020 naming the argument, not a bare 22P02), and
-- list_facts reports valid_from/valid_to as when the fact was true (as
-- recall_facts and fact_history do), with recorded_at/replaced_at for when
-- each version was written and superseded. A changed argument type or result
-- row cannot be replaced in place: the old functions are dropped here.

drop function if exists agentmem.delete_message(uuid);
drop function if exists agentmem.delete_fact(uuid);
drop function if exists agentmem.update_fact(uuid, text, vector, uuid[]);
drop function if exists agentmem.list_facts(text, boolean, text, int);

-- 0011 reserved: placeholder on the user-memory branch only, standing for the
-- worker branch's 0011 so that 0013 applies without a gap. Not to be merged.
select 1;

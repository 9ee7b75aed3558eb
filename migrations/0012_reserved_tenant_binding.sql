-- 0012 reserved: placeholder on the user-memory branch only, standing for the
-- tenant-binding branch's 0012 so that 0013 applies without a gap. Not to be merged.
select 1;

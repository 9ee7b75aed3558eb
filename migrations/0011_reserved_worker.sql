-- 0011 reserved: placeholder on the tenant-binding branch only, standing for the
-- worker branch's 0011 so that 0012 applies without a gap. Not to be merged.
select 1;

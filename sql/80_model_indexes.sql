-- Every registered model has its HNSW index on every (model, embedding) table,
-- including tables added by a later migration.
select agentmem_private.ensure_model_indexes(model)
from agentmem.models
order by model;

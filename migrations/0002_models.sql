-- 0002 models: the registry of embedding models. Installation-wide (no tenant
-- data); every table with (model, embedding) gets one HNSW index per model.

create table agentmem.models (
    model text primary key,
    dimension int not null,
    document_prefix text not null default '',
    query_prefix text not null default '',
    created_at timestamptz not null default now(),
    constraint models_model_ck check (model ~ '^[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}$'),
    constraint models_dimension_ck check (dimension between 1 and 2000)
);

comment on table agentmem.models is
'Embedding models agentmem accepts: dimension and the prefixes the model wants '
'for documents and queries. Installation-wide; edited with agentmem.register_model.';

insert into agentmem.models (model, dimension, document_prefix, query_prefix) values
('nomic-embed-text', 768, 'search_document: ', 'search_query: '),
('all-minilm', 384, '', '');

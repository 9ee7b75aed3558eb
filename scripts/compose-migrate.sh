#!/bin/sh
# docker compose's one-shot `migrate` step, run on every `docker compose up`: installs agentmem, or
# upgrades it when the image holds a newer release; (re)sets the application's and the worker's
# logins and their passwords from .env; schedules retention with pg_cron. Idempotent.
# Needs AGENTMEM_DATABASE_URL (the DBA, password in PGPASSWORD), AGENTMEM_APP_PASSWORD,
# AGENTMEM_WORKER_PASSWORD and AGENTMEM_RETENTION_SCHEDULE (a cron schedule).
set -eu
# The sample passwords of earlier releases' .env.example, or none: refused before anything is made.
for name in PGPASSWORD AGENTMEM_APP_PASSWORD AGENTMEM_WORKER_PASSWORD; do
  eval "value=\${$name:-}"
  case "$value" in
    ""|change-me*)
      shown=$name; [ "$name" = PGPASSWORD ] && shown=AGENTMEM_DBA_PASSWORD
      echo "agentmem: $shown in .env is empty or the sample value: set a password of your own" >&2
      exit 2 ;;
  esac
done
agentmem migrate
psql -X -q -v ON_ERROR_STOP=1 \
  -v app_password="$AGENTMEM_APP_PASSWORD" \
  -v worker_password="$AGENTMEM_WORKER_PASSWORD" \
  -v retention_schedule="$AGENTMEM_RETENTION_SCHEDULE" \
  "$AGENTMEM_DATABASE_URL" <<'SQL'
select pg_catalog.format('create role %I login', r)
  from unnest(array['agentmem_app_user', 'agentmem_worker_user']) as r
 where not exists (select from pg_catalog.pg_roles where rolname = r) \gexec
alter role agentmem_app_user password :'app_password';
alter role agentmem_worker_user password :'worker_password';
select agentmem.grant_app_role(role_name => 'agentmem_app_user');
-- the embedding worker's login (agentmem worker) in its role, once the installed release has it
select 'grant agentmem_worker to agentmem_worker_user'
 where exists (select from pg_catalog.pg_roles where rolname = 'agentmem_worker') \gexec
select agentmem.schedule_retention(schedule => :'retention_schedule') as retention_job;
SQL
echo "agentmem: migrated; logins agentmem_app_user and agentmem_worker_user set; retention scheduled" \
  "($AGENTMEM_RETENTION_SCHEDULE)"

#!/bin/sh
# The tracking server as infra/ runs it: runs and metrics in a database, artifacts proxied to S3 (`--serve-artifacts`:
# clients need no storage credentials), basic auth on. The tests start it the same way, on loopback.
#
#   MLFLOW_BACKEND_STORE_URI      postgresql://user:pass@host/db (tests: sqlite:///...)
#   MLFLOW_AUTH_DATABASE_URI      users and permissions; defaults to the backend store
#   MLFLOW_ARTIFACTS_DESTINATION  s3://bucket/prefix
#   MLFLOW_S3_ENDPOINT_URL        MinIO's URL (empty: AWS S3), with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY
#   MLFLOW_AUTH_ADMIN_PASSWORD    the admin's password, used when the user store is created
#   MLFLOW_FLASK_SERVER_SECRET_KEY
#   MLFLOW_ALLOWED_HOSTS          Host headers accepted besides localhost and private IPs
#   MLFLOW_HOST, MLFLOW_PORT      default 0.0.0.0:5000
#   MLFLOW_WORKERS                server processes (MLflow's default: 4)
set -eu
: "${MLFLOW_BACKEND_STORE_URI:?}" "${MLFLOW_ARTIFACTS_DESTINATION:?}" "${MLFLOW_AUTH_ADMIN_PASSWORD:?}"
: "${MLFLOW_FLASK_SERVER_SECRET_KEY:?}"
auth_config="$(mktemp)"
cat > "$auth_config" <<INI
[mlflow]
default_permission = READ
database_uri = ${MLFLOW_AUTH_DATABASE_URI:-$MLFLOW_BACKEND_STORE_URI}
admin_username = ${MLFLOW_AUTH_ADMIN_USERNAME:-admin}
authorization_function = mlflow.server.auth:authenticate_request_basic_auth
# a password check (PBKDF2) takes a CPU-second: cache good ones for a minute (a changed password may work that long)
auth_cache_ttl_seconds = 60
INI
export MLFLOW_AUTH_CONFIG_PATH="$auth_config"
exec mlflow server --app-name basic-auth \
  --backend-store-uri "$MLFLOW_BACKEND_STORE_URI" \
  --artifacts-destination "$MLFLOW_ARTIFACTS_DESTINATION" --serve-artifacts \
  ${MLFLOW_ALLOWED_HOSTS:+--allowed-hosts "$MLFLOW_ALLOWED_HOSTS"} \
  ${MLFLOW_WORKERS:+--workers "$MLFLOW_WORKERS"} \
  --host "${MLFLOW_HOST:-0.0.0.0}" --port "${MLFLOW_PORT:-5000}"

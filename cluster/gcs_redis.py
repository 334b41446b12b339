"""The Ray head's external Redis on AWS (head-node fault tolerance, docs/guides/clusters.md): prints the shell
exports `ray start --head` needs, read from the SSM parameter /distalign/gcs-redis (a SecureString
"host:port password", e.g. an ElastiCache endpoint and its AUTH token), with the instance profile's credentials.
Prints nothing when the parameter does not exist, so the head starts with the GCS in memory as before.

    redis_env="$(python cluster/gcs_redis.py)" && eval "$redis_env"
    ray start --head ... --redis-password="${GCS_REDIS_PASSWORD:-}"
"""

from __future__ import annotations

import os
import shlex
import sys

import boto3

PARAMETER = os.environ.get("DISTALIGN_GCS_REDIS_PARAMETER", "/distalign/gcs-redis")


def exports(value: str) -> str:
    address, _, password = value.strip().partition(" ")
    if ":" not in address:
        sys.exit(f"SSM parameter {PARAMETER}: expected 'host:port password', got an address without a port")
    return f"export RAY_REDIS_ADDRESS={shlex.quote(address)} GCS_REDIS_PASSWORD={shlex.quote(password)}"


def main() -> None:
    ssm = boto3.client("ssm", endpoint_url=os.environ.get("DISTALIGN_SSM_ENDPOINT") or None)
    try:
        value = ssm.get_parameter(Name=PARAMETER, WithDecryption=True)["Parameter"]["Value"]
    except ssm.exceptions.ParameterNotFound:
        return
    print(exports(value))


if __name__ == "__main__":
    main()

"""The throwaway S3 server (SeaweedFS with STS, scripts/s3-server.sh) shared by the test
suites that put catalogs on object storage (tests/e2e, tests/engines, tests/multinode).

    server = start_s3_server(work_dir, port)   # an S3Server; work_dir is the script's DIR
    ...
    stop_s3_server(work_dir)                   # kills it and deletes work_dir; idempotent

Nothing here depends on pytest: a failed start raises S3ServerError with the script's
stderr, which a fixture turns into a test failure.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts/s3-server.sh"


class S3ServerError(RuntimeError):
    pass


class S3Server:
    """A SeaweedFS S3 server with STS (scripts/s3-server.sh): bucket 'lake', an admin
    key the catalog uses, and a role it assumes to vend credentials."""

    access_key = "floe-admin"
    secret_key = "floe-admin-secret"
    role_arn = "arn:aws:iam::000000000000:role/FloeVended"
    bucket = "lake"
    region = "us-east-1"
    # Credentials asked for with a lifetime under STS's 900 s minimum last this long.
    token_duration_s = 20

    def __init__(self, endpoint: str, work: Path | None = None):
        self.endpoint = endpoint
        self.work = work

    @property
    def server_env(self) -> dict[str, str]:
        """What a Floe server needs to reach the store (its own keys, never a client's)."""
        return {"AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key}

    def storage_config(self, prefix: str | None = None) -> dict:
        """The management API's storageConfigInfo for a catalog under s3://lake/<prefix>/
        (without a prefix: no allowedLocations, as for a server's --storage-config)."""
        config = {"storageType": "S3", "endpoint": self.endpoint, "pathStyleAccess": True,
                  "region": self.region, "roleArn": self.role_arn}
        if prefix is not None:
            config["allowedLocations"] = [f"s3://{self.bucket}/{prefix}/"]
        return config

    def client(self, access_key=None, secret_key=None, token=None, max_attempts=1):
        """A boto3 S3 client, with the admin key unless told otherwise."""
        import boto3
        from botocore.config import Config
        return boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=self.region,
            aws_access_key_id=access_key or self.access_key,
            aws_secret_access_key=secret_key or self.secret_key,
            aws_session_token=token,
            config=Config(s3={"addressing_style": "path"},
                          retries={"max_attempts": max_attempts}))


def start_s3_server(work: Path, port: int,
                    token_duration_s: int = S3Server.token_duration_s) -> S3Server:
    """Start a fresh server under `work` on 127.0.0.1:`port`; credentials STS hands out
    without a DurationSeconds last `token_duration_s`."""
    env = {**os.environ, "FLOE_S3_TOKEN_DURATION": f"{token_duration_s}s"}
    out = subprocess.run(["bash", str(SCRIPT), "start", str(work), str(port)],
                         env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise S3ServerError(f"the S3 server did not start:\n{out.stderr[-4000:]}")
    server = S3Server(out.stdout.strip().splitlines()[-1], Path(work))
    server.token_duration_s = token_duration_s
    return server


def stop_s3_server(work: Path) -> None:
    """Stop the server started under `work` and delete `work` (idempotent)."""
    subprocess.run(["bash", str(SCRIPT), "stop", str(work)], timeout=60)

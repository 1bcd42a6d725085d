"""Lists the keys under a prefix of an S3 bucket (ListObjectsV2, signed with AWS
Signature V4), one per line; Python's standard library only, so that tests/rck/run.sh
needs no boto3. Used in S3 mode to look at the bucket from outside with the admin key.

    python3 tests/rck/s3_list.py ENDPOINT BUCKET PREFIX ACCESS_KEY SECRET_KEY [REGION]
"""

import datetime
import hashlib
import hmac
import sys
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

endpoint, bucket, prefix, access_key, secret_key = sys.argv[1:6]
region = sys.argv[6] if len(sys.argv) > 6 else "us-east-1"
host = urllib.parse.urlparse(endpoint).netloc
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def hmac_sha256(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def quote(s: str) -> str:
    return urllib.parse.quote(s, safe="-_.~")


def list_page(token):
    params = {"list-type": "2", "prefix": prefix}
    if token:
        params["continuation-token"] = token
    query = "&".join(f"{quote(k)}={quote(v)}" for k, v in sorted(params.items()))
    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    signed_headers = "host;x-amz-content-sha256;x-amz-date"
    canonical = "\n".join(["GET", f"/{bucket}", query, f"host:{host}",
                           f"x-amz-content-sha256:{EMPTY_SHA256}", f"x-amz-date:{amz_date}",
                           "", signed_headers, EMPTY_SHA256])
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + secret_key).encode()
    for part in (day, region, "s3", "aws4_request"):
        key = hmac_sha256(key, part)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    request = urllib.request.Request(f"{endpoint}/{bucket}?{query}", headers={
        "x-amz-date": amz_date, "x-amz-content-sha256": EMPTY_SHA256,
        "Authorization": f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
                         f"SignedHeaders={signed_headers}, Signature={signature}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return ET.fromstring(response.read())


keys, token = [], None
for _ in range(10000):  # pages of up to 1000 keys
    root = list_page(token)
    ns = root.tag.split("}")[0] + "}" if root.tag.startswith("{") else ""
    keys += [c.findtext(f"{ns}Key") for c in root.iter(f"{ns}Contents")]
    if root.findtext(f"{ns}IsTruncated") != "true":
        break
    token = root.findtext(f"{ns}NextContinuationToken")
for key in keys:
    print(key)

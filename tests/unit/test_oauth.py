"""OAUTHBEARER tokens from a token endpoint: the request Kafka's Java client sends, reuse until 80%
of the lifetime, and an operator-readable error for every way the endpoint can fail."""

import base64
import json
import urllib.parse

import pytest

from foundation.oauth import ClientCredentials, OAuthTokenError

pytestmark = pytest.mark.unit


class Endpoint:
    def __init__(self, *answers):
        self.answers, self.seen = list(answers), []

    def __call__(self, req, timeout_s):
        self.seen.append(req)
        return self.answers.pop(0)


def _ok(token, expires_in=100):
    return 200, json.dumps({"access_token": token, "token_type": "bearer", "expires_in": expires_in}).encode()


def test_client_credentials_request_and_reuse_until_the_refresh_point():
    now = [1000.0]
    endpoint = Endpoint(_ok("t1"), _ok("t2"))
    client = ClientCredentials("http://idp/token", "krm monitor", lambda: "s3:cr&t", scope="kafka",
                               clock=lambda: now[0], fetch=endpoint)
    assert client.token() == "t1"
    req = endpoint.seen[0]
    assert req.get_method() == "POST" and req.full_url == "http://idp/token"
    assert urllib.parse.parse_qs(req.data.decode()) == {"grant_type": ["client_credentials"], "scope": ["kafka"]}
    # id and secret URL-encoded, then Basic (as HttpAccessTokenRetriever does)
    assert base64.b64decode(req.get_header("Authorization").split()[1]).decode() == "krm%20monitor:s3%3Acr%26t"
    now[0] += 79  # 79% of 100 s: the same token
    assert client.token() == "t1" and client.requests == 1
    now[0] += 2  # past 80%: a new one
    assert client.token() == "t2" and client.requests == 2


@pytest.mark.parametrize("answer, words", [
    ((401, b'{"error":"invalid_client","error_description":"bad secret"}'),
     "the token endpoint http://idp/token answered HTTP 401 (invalid_client: bad secret) for client krm"),
    ((500, b"<html>oops</html>"), "answered HTTP 500 for client krm"),
    ((200, b'{"token_type":"bearer"}'), "answered without an access_token"),
    ((200, b'{"access_token":""}'), "answered an empty access_token"),
])
def test_endpoint_failures_say_what_happened(answer, words):
    client = ClientCredentials("http://idp/token", "krm", lambda: "x", fetch=Endpoint(answer))
    with pytest.raises(OAuthTokenError, match=words.replace("(", r"\(").replace(")", r"\)")):
        client.token()


def test_unreachable_endpoint():
    client = ClientCredentials("http://127.0.0.1:9/token", "krm", lambda: "x", timeout_s=2)
    with pytest.raises(OAuthTokenError, match=r"the token endpoint http://127.0.0.1:9/token is unreachable"):
        client.token()

"""The /metrics web config: exporter-toolkit's format, bcrypt basic auth."""

import base64
import os

import bcrypt
import pytest

from foundation.errors import ConfigError
from foundation.web_config import BasicAuth, load_web_config

pytestmark = pytest.mark.unit

HASH = bcrypt.hashpw(b"scrape-me", bcrypt.gensalt(rounds=4)).decode()


def _file(tmp_path, text, mode=0o600):
    p = tmp_path / "web.yml"
    p.write_text(text)
    os.chmod(p, mode)
    return p


def _header(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_basic_auth_users_checked_with_bcrypt(tmp_path):
    web = load_web_config(_file(tmp_path, f"basic_auth_users:\n  prometheus: '{HASH}'\n"))
    auth = BasicAuth(lambda env, start: [b"ok"], web.users)
    assert auth.allowed(_header("prometheus", "scrape-me"))
    assert auth.allowed(_header("prometheus", "scrape-me"))  # the remembered pair
    assert not auth.allowed(_header("prometheus", "wrong"))
    assert not auth.allowed(_header("nobody", "scrape-me"))
    assert not auth.allowed(None) and not auth.allowed("Bearer x") and not auth.allowed("Basic !!!")


def test_apache_style_2y_hash_accepted(tmp_path):
    web = load_web_config(_file(tmp_path, f"basic_auth_users:\n  p: '$2y${HASH[4:]}'\n"))
    assert BasicAuth(lambda e, s: [], web.users).allowed(_header("p", "scrape-me"))


@pytest.mark.parametrize("text, message", [
    ("basic_auth_users:\n  p: plain-password\n", "not a bcrypt hash"),
    ("http_server_config:\n  http2: true\n", r"unknown key\(s\) \['http_server_config'\]; known: \['basic_auth_users'"),
    ("tls_server_config:\n  cert_file: nowhere.crt\n  key_file: nowhere.key\n", "key_file .* does not exist"),
    ("tls_server_config: [1]\n", "must be a mapping"),
    ("basic_auth_users: [\n", "not valid YAML"),
])
def test_broken_web_config_is_refused(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_web_config(_file(tmp_path, text))


def test_world_readable_hashes_refused(tmp_path):
    with pytest.raises(ConfigError, match="readable by every user"):
        load_web_config(_file(tmp_path, f"basic_auth_users:\n  p: '{HASH}'\n", mode=0o644))


def test_a_taken_metrics_port_is_one_clear_error():
    """Seen in the fault loops: a second process on the port gave `krm collect` a raw OSError traceback."""
    import socket

    from foundation.errors import KrmError
    from foundation.web_config import serve_wsgi

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(KrmError, match=rf"cannot serve /metrics on 127.0.0.1:{port}: Address already in use.*metrics_port"):
            serve_wsgi(lambda environ, start_response: [], "127.0.0.1", port, None)

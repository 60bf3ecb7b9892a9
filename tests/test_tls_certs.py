"""TLS certificates and settings: a CA per topology, owner-only key files, the contexts'
rules, ``heron.tls.*`` and the bad-input errors raised at submit (``wire.tls``)."""

from __future__ import annotations

import datetime
import os
import ssl
import stat

import pytest

from heron_spark import config
from heron_spark.errors import ConfigError
from heron_spark.wire import tls as wire_tls

NOW = datetime.datetime.now(datetime.timezone.utc)


@pytest.fixture(scope="module")
def topology_tls():
    return wire_tls.new_topology_tls("tls-topo", 2)


# ---- certificates, files and settings -----------------------------------------------------
def test_a_new_topology_has_one_ca_and_a_valid_certificate_per_container(topology_tls):
    assert len(topology_tls.containers) == 2
    cas = {m.ca_pem for m in (*topology_tls.containers, topology_tls.control)}
    assert len(cas) == 1
    assert len({m.cert_pem for m in topology_tls.containers}) == 2
    for material in (*topology_tls.containers, topology_tls.control):
        wire_tls.check_material(material, NOW)  # signed by the CA, valid now, key matches


def test_key_material_is_written_owner_only(tmp_path, topology_tls):
    folder = tmp_path / "tls"
    wire_tls.write_material(folder, topology_tls.container(0))
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in os.listdir(folder):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600
    assert wire_tls.read_material(folder) == topology_tls.container(0)
    again = wire_tls.TlsMaterial.from_json(topology_tls.control.to_json())
    assert again == topology_tls.control


def test_contexts_require_tls_1_3_a_client_certificate_and_trust_only_the_ca(topology_tls):
    contexts = wire_tls.contexts(topology_tls.container(0))
    for context in (contexts.server, contexts.client):
        assert context.minimum_version == ssl.TLSVersion.TLSv1_3
        assert context.verify_mode == ssl.CERT_REQUIRED
        assert len(context.get_ca_certs()) == 1  # no system CAs
    assert not contexts.client.check_hostname


def test_tls_enabled_follows_spark_switches_unless_set():
    auto = config.build_system_config({})
    assert auto.tls_enabled == "auto"
    assert config.tls_enabled(auto, spark_wants_tls=True)
    assert not config.tls_enabled(auto, spark_wants_tls=False)
    assert config.tls_enabled(config.build_system_config({config.TLS_ENABLED: True}), False)
    assert not config.tls_enabled(config.build_system_config({config.TLS_ENABLED: "off"}), True)
    spark_conf = {"spark.network.crypto.enabled": "true"}
    assert wire_tls.spark_wants_tls(spark_conf.get)
    assert wire_tls.spark_wants_tls({"spark.ssl.enabled": "TRUE"}.get)
    assert not wire_tls.spark_wants_tls({"spark.ssl.enabled": "false"}.get)


def test_a_bad_tls_enabled_value_names_the_setting():
    with pytest.raises(ConfigError) as err:
        config.build_system_config({config.TLS_ENABLED: "sometimes"})
    assert err.value.key == config.TLS_ENABLED


def test_cert_key_and_ca_come_together():
    with pytest.raises(ConfigError) as err:
        config.build_system_config({config.TLS_CERT: "/c.pem", config.TLS_CA: "/ca.pem"})
    assert err.value.key == config.TLS_KEY


def _user_files(tmp_path, material: wire_tls.TlsMaterial) -> dict[str, str]:
    paths = {}
    for setting, data in ((config.TLS_CERT, material.cert_pem), (config.TLS_KEY, material.key_pem),
                          (config.TLS_CA, material.ca_pem)):
        path = tmp_path / setting.rsplit(".", 1)[1]
        path.write_bytes(data)
        paths[setting] = str(path)
    return paths


def _check_user(paths: dict[str, str]) -> wire_tls.TopologyTls:
    material = wire_tls.user_material(config.build_system_config(paths))
    assert material is not None
    return wire_tls.shared_topology_tls(material, 3)


def _ca():
    return wire_tls.new_ca("user", NOW)


def test_the_users_own_certificate_serves_every_container(tmp_path):
    ca_cert, ca_key = _ca()
    topology = _check_user(_user_files(tmp_path, wire_tls.issue(ca_cert, ca_key, "me", NOW)))
    assert len(set(topology.containers)) == 1 and topology.control == topology.container(2)


def test_an_expired_certificate_is_refused_at_submit(tmp_path):
    ca_cert, ca_key = _ca()
    old = wire_tls.issue(ca_cert, ca_key, "me", NOW - datetime.timedelta(days=30), days=1)
    with pytest.raises(ConfigError) as err:
        _check_user(_user_files(tmp_path, old))
    assert err.value.key == config.TLS_CERT and "expired" in err.value.fix


def test_a_not_yet_valid_certificate_is_refused_at_submit(tmp_path):
    ca_cert, ca_key = _ca()
    later = wire_tls.issue(ca_cert, ca_key, "me", NOW + datetime.timedelta(days=2))
    with pytest.raises(ConfigError) as err:
        _check_user(_user_files(tmp_path, later))
    assert err.value.key == config.TLS_CERT and "not valid before" in err.value.fix


def test_a_certificate_another_ca_signed_is_refused_at_submit(tmp_path):
    ca_cert, ca_key = _ca()
    other_cert, other_key = _ca()
    stranger = wire_tls.issue(other_cert, other_key, "me", NOW)
    material = wire_tls.TlsMaterial(ca_cert, stranger.cert_pem, stranger.key_pem)
    with pytest.raises(ConfigError) as err:
        _check_user(_user_files(tmp_path, material))
    assert err.value.key == config.TLS_CERT and "not signed by" in err.value.fix


def test_a_key_that_does_not_match_the_certificate_is_refused_at_submit(tmp_path):
    ca_cert, ca_key = _ca()
    mine = wire_tls.issue(ca_cert, ca_key, "me", NOW)
    theirs = wire_tls.issue(ca_cert, ca_key, "them", NOW)
    with pytest.raises(ConfigError) as err:
        _check_user(_user_files(tmp_path, wire_tls.TlsMaterial(ca_cert, mine.cert_pem,
                                                               theirs.key_pem)))
    assert err.value.key == config.TLS_KEY and "does not match" in err.value.fix
    assert "PRIVATE KEY" not in str(err.value)  # the key is never shown


def test_a_ca_file_that_cannot_be_read_is_refused_at_submit(tmp_path):
    ca_cert, ca_key = _ca()
    paths = _user_files(tmp_path, wire_tls.issue(ca_cert, ca_key, "me", NOW))
    paths[config.TLS_CA] = str(tmp_path / "missing-ca.pem")
    with pytest.raises(ConfigError) as err:
        _check_user(paths)
    assert err.value.key == config.TLS_CA and err.value.value == paths[config.TLS_CA]


def test_a_ca_file_that_cannot_be_parsed_is_refused_at_submit(tmp_path):
    ca_cert, ca_key = _ca()
    paths = _user_files(tmp_path, wire_tls.issue(ca_cert, ca_key, "me", NOW))
    (tmp_path / "ca").write_text("not a certificate\n")
    with pytest.raises(ConfigError) as err:
        _check_user(paths)
    assert err.value.key == config.TLS_CA


def test_the_users_files_may_be_pyarrow_fs_urls(tmp_path):
    ca_cert, ca_key = _ca()
    paths = {setting: f"file://{path}" for setting, path in
             _user_files(tmp_path, wire_tls.issue(ca_cert, ca_key, "me", NOW)).items()}
    assert _check_user(paths).control.ca_pem == ca_cert
    paths[config.TLS_KEY] = f"file://{tmp_path}/no-such-key.pem"
    with pytest.raises(ConfigError) as err:
        _check_user(paths)
    assert err.value.key == config.TLS_KEY


def test_submit_refuses_bad_tls_files_before_anything_starts(tmp_path, hconf):
    # No Spark session, no state manager, no Spark job: the check comes first (a regression
    # would start a Spark JVM here, which the default tier refuses).
    from examples.word_count import build

    from heron_spark import submit

    ca_cert, ca_key = _ca()
    mine = wire_tls.issue(ca_cert, ca_key, "me", NOW)
    theirs = wire_tls.issue(ca_cert, ca_key, "them", NOW)
    paths = _user_files(tmp_path, wire_tls.TlsMaterial(ca_cert, mine.cert_pem, theirs.key_pem))
    with pytest.raises(ConfigError) as err:
        submit(build(10), conf={**hconf, config.TLS_ENABLED: True, **paths})
    assert err.value.key == config.TLS_KEY
    assert not (tmp_path / "state").exists()

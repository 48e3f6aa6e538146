"""harness.settings: the engine's tunables in one object. Bug classes: a default kept in two
places that drift apart (verify's and assert_kernel's generated-case count), the watchdog
override of `verify --watchdog` not reaching one of the backends."""

from harness import settings
from harness.cli import build_parser


def test_current_is_the_defaults_without_the_watchdog_override(monkeypatch):
    monkeypatch.delenv(settings.WATCHDOG_ENV, raising=False)
    assert settings.current() == settings.DEFAULTS


def test_the_watchdog_override_sets_the_base_of_both_backends(monkeypatch):
    monkeypatch.setenv(settings.WATCHDOG_ENV, "7.5")
    now = settings.current()
    assert now.watchdog_base("cuda") == now.watchdog_base("interpreter") == 7.5
    assert now.watchdog_factor == settings.DEFAULTS.watchdog_factor  # nothing else moves


def test_generated_cases_default_per_backend():
    assert settings.DEFAULTS.max_examples("interpreter") == 30
    assert settings.DEFAULTS.max_examples("cuda") == 200


def test_command_line_defaults_come_from_the_settings():
    parser = build_parser()
    verify = parser.parse_args(["verify"])
    sanitize = parser.parse_args(["sanitize"])
    assert verify.timeout == settings.DEFAULTS.job_timeout_s
    assert sanitize.timeout == settings.DEFAULTS.sanitize_timeout_s

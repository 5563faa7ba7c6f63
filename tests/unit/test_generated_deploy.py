"""deploy/crds.yaml and deploy/rbac.yaml are generated; the committed files must be fresh."""

from __future__ import annotations

from taskfsm.tools import deploygen, rbac


def test_deploy_files_are_fresh():
    """Regenerating deploy/ changes nothing (run `make generate` if this fails)."""
    assert deploygen.stale_files() == [], "stale deploy/ files: run `make generate`"


def test_every_rule_says_why_and_has_verbs():
    """Each RBAC rule documents its reason and grants at least one verb, none of them '*'."""
    for rule in (*rbac.RULES, *rbac.LEASE_RULES):
        assert rule.why
        assert rule.verbs
        assert "*" not in rule.verbs
        assert "*" not in rule.resources

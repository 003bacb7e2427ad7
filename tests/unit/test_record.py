"""grader/box/record.py: the in-container half's records behave as the dataclasses they
replaced (the order's records travel as JSON between the host and the supervisor, and a
key one side does not know is a bug to hear of)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from test_order import order as make_order

from grader.box.order import CheckSpec, Order
from grader.box.record import as_dict, field, record, replace
from grader.box.runners.node_forms import Form
from grader.grading.ship import archive


@record
class Inner:
    name: str
    tags: list[str] = field(default_factory=list)


@record
class Outer:
    inner: Inner
    pairs: list[tuple[str, list[str]]]
    limit: int = 3
    extra: dict[str, Inner] | None = None


def test_fields_in_order_with_defaults_and_a_fresh_default_each():
    a, b = Inner("a"), Inner(name="b")
    a.tags.append("x")
    assert (a.name, a.tags, b.tags) == ("a", ["x"], [])
    assert "tags" not in Inner.__dict__  # no shared list left on the class
    assert Outer(Inner("a"), []).limit == 3


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: Inner(), id="missing"),
        pytest.param(lambda: Inner("a", unknown=1), id="unknown-key"),
        pytest.param(lambda: Inner("a", name="b"), id="twice"),
        pytest.param(lambda: Inner("a", [], 3), id="too-many"),
    ],
)
def test_a_key_it_does_not_know_or_lacks_is_a_type_error(make):
    with pytest.raises(TypeError):
        make()


def test_equality_and_repr_by_value():
    assert Inner("a", ["x"]) == Inner("a", ["x"]) != Inner("a")
    assert Inner("a") != Outer(Inner("a"), [])
    assert repr(Inner("a")) == "Inner(name='a', tags=[])"
    with pytest.raises(TypeError):
        hash(Inner("a"))  # mutable: unhashable, as a dataclass


def test_a_frozen_record_is_read_only_and_hashable():
    form = Form("expect", "toBe", ("not",), "1")
    assert {form: 1}[Form("expect", "toBe", ("not",), "1")] == 1
    with pytest.raises(AttributeError):
        form.name = "toEqual"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del form.name  # type: ignore[misc]


def test_as_dict_and_replace():
    outer = Outer(Inner("a", ["t"]), [("git", ["apply"])], extra={"k": Inner("b")})
    assert as_dict(outer) == {
        "inner": {"name": "a", "tags": ["t"]},
        "pairs": [("git", ["apply"])],
        "limit": 3,
        "extra": {"k": {"name": "b", "tags": []}},
    }
    changed = replace(outer, limit=5)
    assert changed.limit == 5 and changed.inner is outer.inner and outer.limit == 3
    with pytest.raises(TypeError):
        replace(outer, nope=1)


def test_an_order_survives_its_json_and_refuses_a_key_it_does_not_know():
    order = make_order()
    assert Order.from_json(order.to_json()) == order
    doc = as_dict(order)
    doc["check"]["surprise"] = 1
    with pytest.raises(TypeError):
        Order.from_dict(doc)
    assert isinstance(Order.from_json(order.to_json()).check, CheckSpec)


def test_the_box_imports_neither_dataclasses_nor_inspect(tmp_path):
    """What the records are for: the supervisor's start, from its archive as in a run,
    imports neither (25 to 30 ms of a run's CPU)."""
    (tmp_path / "box.zip").write_bytes(archive())
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path / 'box.zip')!r})\n"
        "import grader_box.supervisor, grader_box.runners.pytest, grader_box.runners.jest\n"
        "print(sorted({'dataclasses', 'inspect'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"

"""The declared shape of an incident's `details`: one typed model per incident type, beside its rule.

The rules write details (Spark's `to_json` of a struct, or a dict on the driver); the incidents table
keeps them as JSON; every reader (the CLI, the console, the incident groups, the annotations) reads them
through `parse`, never as a raw dict. `parse` never raises: a field of the wrong shape (a row written by an
older krm, a hand-edited table) is left out and named in `unreadable`, and a key the model does not
declare stays readable in the raw JSON (`raw()`), so a reader shows what it has.

A field name means one thing in every type: a broker list is always `tuple[int, ...]`, a count is never
named like a list (tests/unit/test_incident_details.py checks every model against every other).
"""

from __future__ import annotations

from typing import ClassVar, Mapping, TypeVar

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError, model_validator

Brokers = tuple[int, ...]


class Details(BaseModel):
    """What every incident's details may carry: the cause it opened with and the causes it went through
    (pipelines/incidents.py adds both)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    root_cause: str | None = None
    cause_history: tuple[str, ...] = ()

    # the broker lists an operator acts on, by field name, in the order a person reads them
    ACT_ON: ClassVar[tuple[str, ...]] = ()
    _unreadable: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_absent(cls, data: object) -> object:
        """A null is an absent field (Spark's to_json drops them, the driver's dicts may keep them)."""
        if isinstance(data, Mapping):
            return {k: v for k, v in data.items() if v is not None}
        return data

    @property
    def unreadable(self) -> tuple[str, ...]:
        """The fields present in the stored JSON but not of the declared shape (left out)."""
        return self._unreadable

    def act_on(self) -> list[tuple[str, Brokers]]:
        """The non-empty lists of brokers to act on, by name."""
        out = []
        for name in self.ACT_ON:
            value = getattr(self, name, None)
            if value:
                out.append((name, value))
        return out

    def brokers_named(self) -> set[int]:
        return {b for _, brokers in self.act_on() for b in brokers}

    def headline(self) -> str | None:
        """One line a person reads first (the cut link, the disk that filled, the uneven brokers), or None."""
        return None

    def facts(self) -> list[tuple[str, str]]:
        """The declared fields that are set, as (name, text), the causes last; for `krm incidents show`."""
        out = []
        for name in type(self).model_fields:
            if name in ("root_cause", "cause_history"):
                continue
            value = getattr(self, name)
            if value is None or value == () or value == {}:
                continue
            out.append((name, _text(value)))
        if self.root_cause is not None:
            out.append(("root_cause", self.root_cause))
        return out

    def raw(self) -> dict[str, object]:
        """What it holds as JSON-ready values: the declared fields given and any undeclared key."""
        return self.model_dump(mode="json", exclude_unset=True, exclude_none=True)


def _text(value: object) -> str:
    if isinstance(value, BaseModel):
        return ", ".join(f"{k} {_text(v)}" for k, v in value.model_dump(exclude_none=True).items())
    if isinstance(value, tuple):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return " ".join(f"{k}:{_text(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


class Part(BaseModel):
    """A nested shape inside details (a log directory, a replica's progress)."""

    model_config = ConfigDict(frozen=True, extra="allow")


class PartitionDetails(Details):
    """Every partition incident's details start with the partition as the finding saw it
    (pipelines/detectors/rule.py PartitionView.base). elr / last_known_elr: Kafka 4 only."""

    leader: int | None = None
    leader_epoch: int | None = None
    replicas: Brokers | None = None
    isr: Brokers | None = None
    elr: Brokers | None = None
    last_known_elr: Brokers | None = None

    def brokers_waited_on(self) -> set[int]:
        """The brokers its clients may wait on: its leader, the brokers to act on, its ISR and its replicas (an
        acks=all write waits on every ISR member, and in KRaft on one the leader's pending shrink still counts,
        outside the ISR the metadata shows)."""
        return (self.brokers_named() | ({self.leader} if self.leader is not None else set()) | set(self.isr or ())
                | set(self.replicas or ()))


class PartitionChange(PartitionDetails):
    """A partition compared with its previous state (the leader epoch changed, or offsets went back):
    UNCLEAN_LEADER_ELECTION and OFFSET_REGRESSION (PartitionView.change_details)."""

    high_watermark: int | None = None
    leader_leo: int | None = None
    previous_leader: int | None = None
    previous_leader_epoch: int | None = None
    previous_isr: Brokers | None = None
    previous_elr: Brokers | None = None
    previous_last_known_elr: Brokers | None = None
    previous_high_watermark: int | None = None
    hw_lost: int | None = None
    unclean_leader_election: bool | None = None


M = TypeVar("M", bound=BaseModel)


def parse(model: type[M], raw: object) -> M:
    """`raw` (a stored incident's details) as `model`; never raises. Fields of another shape are left out
    and, for a `Details`, named in `unreadable`."""
    data = {str(k): v for k, v in raw.items()} if isinstance(raw, Mapping) else {}
    dropped: list[str] = []
    while True:
        try:
            out = model.model_validate(data)
            break
        except ValidationError as e:
            if not data:  # nothing left to leave out: the declared defaults
                out = model.model_construct()
                break
            bad = {str(err["loc"][0]) for err in e.errors() if err["loc"]}
            if not bad & set(data):  # an error not of one field: keep nothing
                data, dropped = {}, dropped + sorted(data)
                continue
            dropped += sorted(bad & set(data))
            data = {k: v for k, v in data.items() if k not in bad}
    if isinstance(out, Details) and dropped:
        out._unreadable = tuple(dropped)
    return out


def problems(model: type[BaseModel], raw: Mapping[str, object]) -> list[str]:
    """What a rule wrote that its declared shape does not say: undeclared keys and ill-shaped fields
    (the golden tests hold every rule's output to its declaration)."""
    out = [f"{k!r} is not declared" for k in raw if k not in model.model_fields]
    try:
        model.model_validate({k: v for k, v in raw.items() if k in model.model_fields})
    except ValidationError as e:
        out += [f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in e.errors()]
    return out

"""The machinery under every settings model: pydantic tables that refuse unknown keys and wrong types,
and pydantic's errors said the way krm says them, naming the file, the table and the key:

    krm.toml: [collector] poll_interval_s must be >= 0.05, got 0
    krm.toml: [clusters.security] of prod-1 security_protocol must be one of PLAINTEXT, SSL, ...

A model declares its keys once (type, bounds, default, a comment saying what it is for); the config
file (foundation/config.py), the cluster logins (foundation/security.py), the object store
(foundation/storage.py) and the /metrics web config (foundation/web_config.py) are such models.
Paths in a table are taken relative to the file that holds it (the validation context's `base`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Callable, TypeVar

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationError,
                      ValidationInfo, model_validator)
from pydantic_core import PydanticCustomError

from foundation.errors import ConfigError

# secrets never sit in a config file; their keys say where a secret lives instead
SECRET_KEYS = ("password", "sasl_password", "ssl_key_password")


class Table(BaseModel):
    """One table of a settings file: every key declared, unknown keys refused (listing the known ones),
    scalars of exactly the declared type (no "5" for 5, no 1 for true). Frozen: settings are read once."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", arbitrary_types_allowed=True,
                              populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data  # pydantic says "must be a table"
        for key in SECRET_KEYS:
            if key in data:
                raise PydanticCustomError(
                    "secret_in_config", "{key}: secrets are not kept in the config; use {key}_file (a file only "
                    "its owner reads) or {key}_env", {"key": key})
        fields = {name: f for name, f in cls.model_fields.items() if not f.exclude}
        known = {f.alias or name for name, f in fields.items()}
        unknown = sorted(set(data) - known - set(fields))  # code may give a field by its name
        if unknown:
            raise PydanticCustomError("unknown_keys", "unknown key(s) {unknown}; known: {known}",
                                      {"unknown": str(unknown), "known": str(sorted(known))})
        return data


Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


def _as_path(value: Any, info: ValidationInfo) -> Any:
    if isinstance(value, Path):
        return value
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be a file path, got {value!r}")
    p = Path(value.strip()).expanduser()
    base = (info.context or {}).get("base")
    return p if p.is_absolute() or base is None else Path(base) / p


# a file path; a relative one is taken from the folder of the file that names it
File = Annotated[Path, BeforeValidator(_as_path)]


def _env_name(value: str) -> str:
    if not value.replace("_", "").isalnum():
        raise ValueError(f"must name an environment variable, got {value!r}")
    return value


EnvName = Annotated[Text, AfterValidator(_env_name)]


def tuple_field(default: Any = (), **kw: Any) -> Any:
    """A list in the file, a tuple in the model (TOML has no tuples)."""
    return Field(default=default, strict=False, **kw)


def checked(fn: Callable[..., Any], *args: Any) -> Any:
    """Run a check that raises ConfigError (shared with code outside validation) as a validation error."""
    try:
        return fn(*args)
    except ConfigError as e:
        raise ValueError(str(e)) from None


# ---------------------------------------------------------------- errors, as krm says them

# The name of the table at a location ("[collector]", "[[clusters]] #2", "[clusters.security] of prod-1"),
# "" for the top level, None where the location is not a table (a key, a list item)
Section = Callable[[tuple[Any, ...]], "str | None"]

_EXPECTED = {
    "int_type": "an integer", "int_from_float": "an integer", "float_type": "a number", "bool_type": "true or false",
    "string_type": "a non-empty string", "string_too_short": "a non-empty string", "list_type": "a list",
    "tuple_type": "a list", "dict_type": "a table", "model_type": "a table", "model_attributes_type": "a table",
}


T = TypeVar("T", bound="Table")


def validate(model: type[T], data: Any, where: str, section: Section, base: Path | None = None,
             words: dict[str, str] | None = None) -> T:
    """`model` from `data`, or one ConfigError saying every problem (one line each) with file, table, key.
    `words`: how this file's format names a type (YAML says "a mapping" where TOML says "a table")."""
    try:
        return model.model_validate(data, context={"base": base})
    except ValidationError as e:
        expected = _EXPECTED | (words or {})
        raise ConfigError("\n".join(dict.fromkeys(_say(err, where, section, expected) for err in e.errors()))) from None


def _say(err: Any, where: str, section: Section, expected: dict[str, str]) -> str:
    loc = tuple(err["loc"])
    kind, ctx, got = err["type"], err.get("ctx") or {}, err.get("input")
    table = section(loc)
    if table is not None:  # about a table as a whole (its keys, or a rule between them)
        sec, key = table, ""
    else:  # about one key: the last name in loc; what precedes it is its table
        at = max(i for i, part in enumerate(loc) if isinstance(part, str))
        sec, key = section(loc[:at]) or "", str(loc[at])
    head = f"{where}: {(sec + ' ' + key).strip() or 'top level'}"
    if kind in ("unknown_keys", "secret_in_config"):
        return f"{where}: {sec or 'top level'}: {err['msg']}"
    if kind == "extra_forbidden":  # the before-validator names them all; this is a model without it
        return f"{where}: {sec or 'top level'}: unknown key(s) [{key!r}]"
    if kind == "missing":
        return f"{where}: {sec or 'top level'} is missing required key {key!r}"
    if kind in ("greater_than_equal", "greater_than"):
        return f"{head} must be {'>=' if kind.endswith('equal') else '>'} {ctx.get('ge', ctx.get('gt'))}, got {got}"
    if kind in ("less_than_equal", "less_than"):
        return f"{head} must be {'<=' if kind.endswith('equal') else '<'} {ctx.get('le', ctx.get('lt'))}, got {got}"
    if kind in expected:
        return f"{head} must be {expected[kind]}, got {got!r}"
    if kind == "literal_error":
        return f"{head} must be {ctx.get('expected')}, got {got!r}"
    if kind == "value_error":
        text = str(ctx.get("error", err["msg"]))
        # a message that names its own table (it is about another key than the one checked) stands alone
        return f"{where}: {text}" if text.startswith("[") else f"{head} {text}"
    return f"{head}: {err['msg']}"

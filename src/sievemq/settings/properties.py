"""Settings as RocketMQ's tools read them: Java properties text with camelCase keys and Java's value text
(GET_BROKER_CONFIG 26, GET_NAMESRV_CONFIG 319: ``mqadmin getBrokerConfig``, ``getNamesrvConfig``)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from sievemq.settings.loading import camel

__all__ = ["config_properties", "java_double", "java_text"]


def java_double(x: float) -> str:
    """``String.valueOf(double)`` for the values a rate or ratio takes: ``0.0``, ``12.5``, ``1.0E-4``."""
    if x != 0 and math.isfinite(x) and (abs(x) < 1e-3 or abs(x) >= 1e7):
        exp = math.floor(math.log10(abs(x)))
        mantissa = round(x / 10**exp, 15)
        if abs(mantissa) >= 10:  # rounding carried over
            mantissa, exp = mantissa / 10, exp + 1
        return f"{mantissa!r}E{exp}"
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    text = repr(float(x))
    return text if "." in text else text + ".0"


def java_text(value: Any) -> str:
    """A setting's value as RocketMQ's settings print (``true``, ``30``, ``0.5``, text as it is, none as empty): a
    whole number of sievemq's fractional settings (``fileReservedTime``) as RocketMQ's integer one."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else java_double(value)
    return "" if value is None else str(value)


def config_properties(config: Any) -> str:
    """A config dataclass as properties text (``key=value`` lines, camelCase keys), secret settings (those left
    out of its repr) left out."""
    lines = [f"{camel(f.name)}={java_text(getattr(config, f.name))}" for f in dataclasses.fields(config) if f.repr]
    return "".join(line + "\n" for line in lines)

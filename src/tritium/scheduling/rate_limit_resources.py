"""The resources of Triton's rate limiter: how many copies of each exist, and how many
are taken.

A resource is a name and a place: a device (each device has its own copies) or the whole
server (a *global* resource, one set of copies). An instance needs some copies of some
resources on its own device (or globally) to run a batch; it takes them when the batch
starts and gives them back when it ends.

How many copies exist, as Triton decides it: without ``--rate-limit-resource``, the most
any one registered instance needs (so that every instance can run); once any resource is
listed, exactly what is listed (a listed resource without a device applies to every
device; a global resource gets the largest count listed for its name; a resource nobody
listed has no copies), and an instance needing more than exists is refused with Triton's
words. The limits are worked out again whenever instances come or go.

Pure bookkeeping: no clock, no event loop (``RateLimiter`` decides who goes next).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from tritium.core.errors import InvalidArgument

#: The place of a global resource (devices are numbered from 0).
GLOBAL = -2
#: The device of a ``--rate-limit-resource`` given without one: every device.
EVERY_DEVICE = -1

#: (place, resource name): the place is a device number or GLOBAL.
Key = tuple[int, str]
Needs = Mapping[Key, int]


class ResourcePool:
    """Copies of each resource: the limits, the instances that count towards them, and
    how many copies are taken now."""

    def __init__(self, explicit: Mapping[int, Mapping[str, int]] | None = None) -> None:
        # device (or EVERY_DEVICE) -> name -> count, from --rate-limit-resource.
        self._explicit = {d: dict(r) for d, r in (explicit or {}).items() if r}
        self._needs: dict[Hashable, dict[Key, int]] = {}
        self._limits: dict[Key, int] = {}
        self._taken: dict[Key, int] = {}

    @property
    def explicit(self) -> bool:
        """Whether the counts were given (``--rate-limit-resource``) rather than derived."""
        return bool(self._explicit)

    def limits(self) -> dict[Key, int]:
        """How many copies of each resource exist now."""
        return dict(self._limits)

    def taken(self) -> dict[Key, int]:
        """How many copies of each resource are taken now (only those with any)."""
        return {key: n for key, n in self._taken.items() if n}

    def register(self, owners: Mapping[Hashable, Needs]) -> None:
        """Count the needs of ``owners`` (the instances of one model version) towards the
        limits, all or none: raises ``InvalidArgument`` with Triton's text when the
        listed counts cannot run one of them, or a resource is both global and not."""
        for owner, needs in owners.items():
            self._needs[owner] = dict(needs)
        try:
            self._limits = self._compute_limits()
        except InvalidArgument:
            for owner in owners:
                self._needs.pop(owner, None)
            self._limits = self._compute_limits()
            raise

    def unregister(self, owners: list[Hashable]) -> None:
        """Stop counting ``owners`` (their version is gone). Copies they hold now are given
        back as usual when their batch ends."""
        for owner in owners:
            self._needs.pop(owner, None)
        self._limits = self._compute_limits()

    def try_take(self, needs: Needs) -> bool:
        """Take the copies ``needs`` asks for if all of them are free now."""
        limits = self._limits
        taken = self._taken
        for key, count in needs.items():
            if taken.get(key, 0) + count > limits.get(key, 0):
                return False
        for key, count in needs.items():
            taken[key] = taken.get(key, 0) + count
        return True

    def give_back(self, needs: Needs) -> None:
        taken = self._taken
        for key, count in needs.items():
            taken[key] -= count

    def _compute_limits(self) -> dict[Key, int]:
        most: dict[Key, int] = {}
        for needs in self._needs.values():
            for key, count in needs.items():
                if count > most.get(key, 0):
                    most[key] = count
        _check_places(most)
        if not self._explicit:
            return most
        limits: dict[Key, int] = {}
        for (place, name), needed in most.items():
            have = self._listed(place, name)
            if have < needed:
                raise InvalidArgument(
                    f'Resource count for "{name}" is limited to {have} which will prevent '
                    "scheduling of one or more model instances, the minimum required count "
                    f"is {needed}"
                )
            limits[place, name] = have
        return limits

    def _listed(self, place: int, name: str) -> int:
        """The copies of ``name`` at ``place`` that --rate-limit-resource gives (0: none)."""
        if place == GLOBAL:
            # A global resource: the largest count listed for the name, on any device.
            return max((r.get(name, 0) for r in self._explicit.values()), default=0)
        return max(
            self._explicit.get(place, {}).get(name, 0),
            self._explicit.get(EVERY_DEVICE, {}).get(name, 0),
        )


def _check_places(most: Mapping[Key, int]) -> None:
    global_names = {name for place, name in most if place == GLOBAL}
    for place, name in most:
        if place != GLOBAL and name in global_names:
            raise InvalidArgument(
                f'Resource "{name}" is present as both global and device-specific resource '
                "in the model configuration."
            )


def parse_resource_option(text: str) -> tuple[str, int, int]:
    """One ``--rate-limit-resource`` value, ``<name>:<count>[:<device>]``, as (name,
    count, device), the device EVERY_DEVICE when not given; ``ValueError`` otherwise."""
    parts = text.split(":")
    problem = (
        "--rate-limit-resource option format is '<resource_name>:<count>:<device>' or "
        f"'<resource_name>:<count>'. Got {text}"
    )
    if len(parts) not in (2, 3) or not parts[0]:
        raise ValueError(problem)
    try:
        count = int(parts[1])
        device = int(parts[2]) if len(parts) == 3 else EVERY_DEVICE
    except ValueError:
        raise ValueError(problem) from None
    if count < 0 or (len(parts) == 3 and device < 0):
        raise ValueError(problem)
    return parts[0], count, device


def explicit_resources(values: tuple[str, ...]) -> dict[int, dict[str, int]]:
    """``--rate-limit-resource`` values as device (or EVERY_DEVICE) -> name -> count; a
    resource listed twice for one device keeps the last count."""
    resources: dict[int, dict[str, int]] = {}
    for value in values:
        name, count, device = parse_resource_option(value)
        resources.setdefault(device, {})[name] = count
    return resources

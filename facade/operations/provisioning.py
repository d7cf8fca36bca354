"""Creating a deployment's internal topics ahead of its clients (``rocketkafka admin provision``).

Every client creates the internal topics it needs and cannot find, which takes a CREATE grant.
On a secured cluster only the ``admin`` role has one
(:mod:`rocketkafka.operations.permissions`): it provisions a deployment's topics once, and the
other roles find them and need no CREATE. Existing topics keep their partition counts.
"""

from __future__ import annotations

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.operations.permissions import Deployment
from rocketkafka.operations.topics import warn_not_judged
from rocketkafka.schedule.tiers import Tiers
from rocketkafka.trace import TRACE_PARTITIONS
from rocketkafka.txn.options import CHECK_PARTITIONS, HALF_PARTITIONS, MAX_CHECK_PARTITIONS


def deployment_topics(deployment: Deployment, settings: Settings, half_partitions: int = HALF_PARTITIONS,
                      check_partitions: int = CHECK_PARTITIONS) -> dict[str, int]:
    """The internal topics the clients of ``deployment`` use, with the partitions each gets when created.

    ``settings`` gives the delay levels (``ROCKETKAFKA_DELAY_*``); its topic prefix is the deployment's.
    """
    d, names = deployment, deployment.names
    wanted: dict[str, int] = {}
    if d.delay or (d.consumer_retries and d.retry_backoff and d.consumer_groups):
        wanted.update({t: settings.delay.partitions for t in Tiers(names, settings.delay).topics()})
        wanted[names.dead_letter(d.forwarder_group)] = 1
    if not d.broadcasting:
        for group in d.consumer_groups:
            wanted[names.dead_letter(group)] = 1
            if d.consumer_retries:
                wanted[names.retry(group)] = 1
    if d.producer_groups:
        wanted.update({names.half(): half_partitions, names.op(): half_partitions,
                       names.max_check(): MAX_CHECK_PARTITIONS})
        for group in d.producer_groups:
            check = names.check_request(group)
            wanted.update({check: check_partitions, names.retry(check): 1, names.dead_letter(check): 1})
    if d.trace:
        wanted[names.trace()] = TRACE_PARTITIONS
    if d.exactly_once:
        wanted[names.probe()] = 1
    return wanted


def provision_topics(settings: Settings, deployment: Deployment, half_partitions: int = HALF_PARTITIONS,
                     check_partitions: int = CHECK_PARTITIONS) -> dict[str, bool]:
    """Create the internal topics of ``deployment`` that do not exist; ``{topic: created now}`` of each.

    Raises:
        ConfigError: the deployment's prefix is not the settings', the broker refuses a topic's settings, or
            this principal may not create a missing topic (the message names the grant).
        BrokerUnavailableError: no broker answered.
    """
    from rocketkafka.errors import ConfigError

    if deployment.topic_prefix != settings.topic_prefix:
        raise ConfigError(f"the deployment's topic prefix {deployment.topic_prefix!r} is not the settings' "
                          f"{settings.topic_prefix!r} (ROCKETKAFKA_TOPIC_PREFIX)")
    wanted = deployment_topics(deployment, settings, half_partitions, check_partitions)
    with TopicAdmin(settings) as admin:
        created = set(admin.create_internal(wanted))
        warn_not_judged(admin)
    return {topic: topic in created for topic in sorted(wanted)}

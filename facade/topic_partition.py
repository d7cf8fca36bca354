"""``TP``: one partition of one topic as ``(topic, partition number)``, the one alias the code base uses.

A plain tuple, hashable and ordered, so it keys dicts and sorts; confluent-kafka's
``TopicPartition`` (which carries an offset too) is made from one only where a client is called.
"""

from __future__ import annotations

TP = tuple[str, int]

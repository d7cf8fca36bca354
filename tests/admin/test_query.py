"""`admin query-msg`: by id and by key, through the message index (O(1)) or a bounded scan."""

from __future__ import annotations

import pytest

from rocketkafka import Producer

pytestmark = pytest.mark.integration


def test_query_by_id_and_key_through_the_index(rk_settings, rk_topic, send, admin, admin_json):
    topic = rk_topic(partitions=3)
    with Producer("indexed", settings=rk_settings, message_index=True) as producer:
        ids = send(topic, 6, producer=producer, keys=lambda i: [f"order-{i % 2}", f"row-{i}"])
        producer.sender.index.flush()
    [found] = admin_json("query-msg", "--id", ids[4])
    assert (found["msg_id"], found["found_by"], found["body"], found["keys"]) == (ids[4], "index", "m4", "order-0 row-4")
    by_key = admin_json("query-msg", "--key", "order-1", "--topic", topic)
    assert [f["msg_id"] for f in by_key] == [ids[1], ids[3], ids[5]] and {f["found_by"] for f in by_key} == {"index"}
    at = f"{topic}@{found['partition']}@{found['offset']}"
    [direct] = admin_json("query-msg", "--id", at)
    assert (direct["msg_id"], direct["found_by"]) == (ids[4], "offset")
    code, text = admin("query-msg", "--key", "row-2", "--topic", topic)
    assert code == 0 and ids[2] in text and "index" in text


def test_without_the_index_a_bounded_scan_finds_them(rk_settings, rk_topic, send, admin, admin_json):
    topic = rk_topic(partitions=2)
    ids = send(topic, 8, keys=lambda i: f"k{i % 3}")
    [found] = admin_json("query-msg", "--id", ids[5], "--topic", topic)
    assert (found["msg_id"], found["found_by"], found["body"]) == (ids[5], "scan", "m5")
    by_key = admin_json("query-msg", "--key", "k2", "--topic", topic)
    assert sorted(f["msg_id"] for f in by_key) == sorted([ids[2], ids[5]])
    code, text = admin("query-msg", "--id", ids[5])
    assert code == 1 and text.strip() == (f"Error: message {ids[5]} is not in the message index; pass --topic to scan "
                                          "the topic around the id's creation time")
    code, text = admin("query-msg", "--id", "nonsense")
    assert code == 1 and "is not a message id" in text
    assert admin_json("query-msg", "--key", "nobody", "--topic", topic) == []

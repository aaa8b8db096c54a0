"""The default parallelism read from Spark's conf, as a classic or a Connect session has it."""

from __future__ import annotations

import os

import pytest

from sources.spark.parallelism import driver_cores, parallelism_from_conf


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ({"spark.master": "local"}, 1),
        ({"spark.master": "local[3]"}, 3),
        ({"spark.master": "local[4, 2]"}, 4),
        ({"spark.master": "local-cluster[2,1,1024]"}, 2),
        ({"spark.master": "local-cluster[3, 2, 1024]"}, 6),
        ({"spark.master": "local[2]", "spark.default.parallelism": "8"}, 8),
        (
            {
                "spark.master": "local[2]",
                "spark.default.parallelism": "8",
                "spark.sql.leafNodeDefaultParallelism": "5",
            },
            5,
        ),
        (
            {
                "spark.master": "yarn",
                "spark.executor.instances": "4",
                "spark.executor.cores": "3",
            },
            12,
        ),
        ({"spark.master": "spark://127.0.0.1:7077", "spark.cores.max": "6"}, 6),
    ],
)
def test_the_conf_tells_the_parallelism(conf: dict[str, str], expected: int) -> None:
    assert parallelism_from_conf(conf) == expected


@pytest.mark.parametrize(
    "conf",
    [
        {},
        {"spark.master": "local[*]"},
        {"spark.master": "spark://127.0.0.1:7077"},
        {"spark.master": "k8s://https://127.0.0.1:6443", "spark.executor.instances": "2"},
    ],
)
def test_only_the_cluster_knows_it_otherwise(conf: dict[str, str]) -> None:
    assert parallelism_from_conf(conf) is None


def test_a_setting_that_is_not_a_positive_number_is_passed_over() -> None:
    conf = {"spark.master": "local[2]", "spark.default.parallelism": "0"}
    assert parallelism_from_conf(conf) == 2


def test_the_fallback_is_the_cores_this_process_may_use() -> None:
    assert 1 <= driver_cores() <= (os.cpu_count() or 1)

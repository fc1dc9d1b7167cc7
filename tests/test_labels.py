"""Cleaning, majority vote, buckets and slice tables on hand-made fixtures."""

import numpy as np
import pandas as pd

from emolia_bench.labels import (
    benchmark_labels,
    clean_annotations,
    incomplete_items,
    item_table,
    majority_vote,
    slice_table,
)
from emolia_bench.subsets import DIM, EMO


def emo_rows(rows):
    """rows: (user, file, queried, task, rating, created_at)"""
    df = pd.DataFrame(rows, columns=["username", "file_name", "queried_emotion", "task_type", "rating", "created_at"])
    df["annotation_id"] = [f"id{i}" for i in range(len(df))]
    df["source_emotion"] = "Awe"
    df["reaction_time_ms"] = "1000"
    df["sample_time_ms"] = "2000"
    return df


def test_majority_vote_tie_rule():
    counts = np.array([
        [1, 1, 1],  # three-way tie -> smallest tied value 0
        [0, 2, 2],  # 1,1,2,2 -> tie between 1 and 2 -> 1
        [1, 2, 2],  # 0,1,1,2,2: ours takes the smallest *tied* value (1); upstream took 0 [ours]
        [0, 0, 3],
        [2, 1, 0],
    ])
    winner, votes, tie = majority_vote(counts)
    assert winner.tolist() == [0, 1, 1, 2, 0]
    assert votes.tolist() == [1, 2, 2, 3, 2]
    assert tie.tolist() == [True, True, True, False, False]


def test_binary_one_one_split_is_absent():
    winner, votes, tie = majority_vote(np.array([[1, 1]]))
    assert (winner[0], votes[0], tie[0]) == (0, 1, True)


def test_latest_vote_wins_and_equal_timestamps_keep_file_order():
    df = emo_rows([
        ("u0", "A.mp3", "Awe", "affirmative", "not_present", "2026-04-01 10:05:00"),
        ("u0", "A.mp3", "Awe", "affirmative", "strongly_present", "2026-04-01 10:01:00"),  # older: loses
        ("u1", "A.mp3", "Awe", "affirmative", "weakly_present", "2026-04-01 10:00:00"),
        ("u1", "A.mp3", "Awe", "affirmative", "strongly_present", "2026-04-01 10:00:00"),  # same time, later row wins
    ])
    clean = clean_annotations(df, EMO)
    assert dict(zip(clean["username"], clean["rating"], strict=True)) == {"u0": "not_present", "u1": "strongly_present"}


def test_item_columns_buckets_and_prior():
    # Item 1 (affirmative): ratings 0,1,2 -> ordinal tie -> 0 (votes 1); binary 0,1,1 -> present with 2 votes.
    # Item 2 (ultimate): 2,2 -> unanimous present (2 raters), prior absent -> no match.
    # Item 3 (contrastive_1): single rater, weakly -> present: single_rater_present.
    # Item 4 (penultimate): 0,0,0 -> unanimous_absent, matches the prior.
    df = emo_rows([
        ("u0", "A.mp3", "Awe", "affirmative", "not_present", "2026-04-01 10:00:00"),
        ("u1", "A.mp3", "Awe", "affirmative", "weakly_present", "2026-04-01 10:00:01"),
        ("u2", "A.mp3", "Awe", "affirmative", "strongly_present", "2026-04-01 10:00:02"),
        ("u0", "B.mp3", "Fear", "ultimate", "strongly_present", "2026-04-01 10:00:03"),
        ("u1", "B.mp3", "Fear", "ultimate", "strongly_present", "2026-04-01 10:00:04"),
        ("u2", "C.mp3", "Awe", "contrastive_1", "weakly_present", "2026-04-01 10:00:05"),
        ("u0", "D.mp3", "Awe", "penultimate", "not_present", "2026-04-01 10:00:06"),
        ("u1", "D.mp3", "Awe", "penultimate", "not_present", "2026-04-01 10:00:07"),
        ("u2", "D.mp3", "Awe", "penultimate", "not_present", "2026-04-01 10:00:08"),
    ])
    labels = benchmark_labels(item_table(clean_annotations(df, EMO), EMO), EMO).set_index("file_name")
    assert list(labels.reset_index().columns) == list(EMO.label_columns)
    a = labels.loc["A.mp3"]
    assert (a.majority_rating_int, a.majority_rating_votes, a.majority_rating_tie, a.majority_rating) == (0, 1, True, "not_present")
    assert (a.majority_present, a.majority_present_votes, a.majority_present_tie) == (1, 2, False)
    assert (a.strongly_present_votes, a.weakly_present_votes, a.not_present_votes) == (1, 1, 1)
    assert a.benchmark_bucket == "majority_present" and a.matches_intended_label and a.intended_present == 1
    assert a.usernames == "u0|u1|u2"
    b = labels.loc["B.mp3"]
    assert b.benchmark_bucket == "unanimous_present" and b.all_agree_ordinal and not b.matches_intended_label
    assert labels.loc["C.mp3"].benchmark_bucket == "single_rater_present"
    assert not labels.loc["C.mp3"].all_agree_binary  # one rater is never "all agree"
    assert labels.loc["D.mp3"].benchmark_bucket == "unanimous_absent"
    # sorted by task_type, queried_emotion, file_name
    assert labels["task_type"].tolist() == ["affirmative", "contrastive_1", "penultimate", "ultimate"]


def test_dim_levels_sort_as_strings_and_flags_match_string_levels():
    rows = []
    for i, level in enumerate(["10", "2", "Americas"]):
        rows.append(dict(annotation_id=f"i{i}", username="u0", dimension="TEMP", level=level, polarity="negative",
                         file_name="s.mp3", rating="yes", reaction_time_ms="1", sample_time_ms="1",
                         created_at="2026-04-01 10:00:00"))
    df = pd.DataFrame(rows)
    flags = pd.DataFrame([dict(flag_id="f", username="x", dimension="TEMP", level="2", polarity="negative",
                               file_name="s.mp3", reason="noise", created_at="2026-04-01 10:00:00")])
    labels = benchmark_labels(item_table(clean_annotations(df, DIM), DIM, flags), DIM)
    assert labels["level"].tolist() == ["10", "2", "Americas"]  # string order, not numeric
    assert labels["flagged"].tolist() == [False, True, False]
    assert labels["benchmark_bucket"].tolist() == ["single_rater_yes"] * 3
    assert labels["matches_intended_polarity"].tolist() == [False] * 3  # yes on a negative sample


def test_slice_table_rates_and_tie_break():
    labels = pd.DataFrame({"dimension": ["B", "A", "A", "B", "C"], "majority_present": [1, 0, 1, 1, 0],
                           "all_agree_binary": [True, False, False, True, False],
                           "matches_intended_polarity": [True, True, False, False, True]})
    table = slice_table(labels, DIM.slice_tables[0])
    # A and B both have 2 items: the tie is broken by the key ascending
    assert table["dimension"].tolist() == ["A", "B", "C"]
    assert table["majority_yes_rate"].tolist() == [0.5, 1.0, 0.0]
    assert table["unanimous_rate"].tolist() == [0.0, 1.0, 0.0]
    assert table["polarity_match_rate"].tolist() == [0.5, 0.5, 1.0]


def test_incomplete_items_sorted_by_count_then_key():
    items = pd.DataFrame({"file_name": ["b", "a", "c", "d"], "queried_emotion": ["X"] * 4, "task_type": ["ultimate"] * 4,
                          "n_raters": [2, 2, 3, 1], "usernames": ["u0|u1", "u1|u2", "u0|u1|u2", "u2"]})
    out = incomplete_items(items, EMO, 3)
    assert out["file_name"].tolist() == ["d", "a", "b"]
    assert out.columns.tolist() == ["file_name", "queried_emotion", "task_type", "ratings_observed", "usernames"]

"""The pgoutput decoder against what a real server sends through the slot's SQL interface."""

from __future__ import annotations

from helpers.postgres import PostgresServer
from readers.postgres.pgoutput import UNCHANGED, PgoutputDecoder
from sources.postgres.slot import advance_slot, create_slot, lsn_number, peek_changes


def test_inserts_updates_deletes_and_truncates_arrive_in_order_with_their_rows(
    postgres: PostgresServer, postgres_database: str
) -> None:
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY, name text, note text)")
        db.execute("ALTER TABLE items ALTER note SET STORAGE EXTERNAL")  # out of line, as is
        db.execute("CREATE TABLE full_items (id bigint PRIMARY KEY, name text)")
        db.execute("ALTER TABLE full_items REPLICA IDENTITY FULL")
        db.execute("CREATE PUBLICATION capture FOR TABLE items, full_items")
        point = create_slot(db, "decoder")
        big = "x" * 100_000  # stored out of line (TOAST): an update that keeps it omits it
        with db.transaction():
            db.execute("INSERT INTO items VALUES (1, 'one', %s), (2, NULL, 'n')", (big,))
            db.execute("INSERT INTO full_items VALUES (7, 'seven')")
        db.execute("UPDATE items SET name = 'uno' WHERE id = 1")
        db.execute("UPDATE full_items SET name = 'siete' WHERE id = 7")
        db.execute("DELETE FROM items WHERE id = 2")
        db.execute("TRUNCATE full_items")
        (upto,) = db.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
        messages = peek_changes(db, "decoder", "capture", lsn_number(upto))
        again = peek_changes(db, "decoder", "capture", lsn_number(upto))

    changes = list(PgoutputDecoder().decode(message for _, _, message in messages))
    assert [(c.op, c.relation.qualified, c.seq) for c in changes] == [
        ("c", "public.items", 1),
        ("c", "public.items", 2),
        ("c", "public.full_items", 3),
        ("u", "public.items", 1),
        ("u", "public.full_items", 1),
        ("d", "public.items", 1),
        ("t", "public.full_items", 1),
    ]
    assert changes[0].after == ("1", "one", big) and changes[0].before is None
    assert changes[1].after == ("2", None, "n")
    assert changes[3].after == ("1", "uno", UNCHANGED)  # not NULL: not sent
    assert changes[4].before == ("7", "seven") and changes[4].after == ("7", "siete")
    assert changes[5].before == ("2", None, None) and changes[5].after is None  # key only
    assert len({c.lsn for c in changes}) == 5 and all(c.lsn >= point.lsn for c in changes)
    assert changes[0].xid == changes[2].xid != changes[3].xid
    assert again == messages  # a peek moves nothing


def test_an_advanced_slot_gives_only_what_follows(
    postgres: PostgresServer, postgres_database: str
) -> None:
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY)")
        db.execute("CREATE PUBLICATION capture FOR TABLE items")
        create_slot(db, "advanced")
        db.execute("INSERT INTO items VALUES (1)")
        (middle,) = db.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
        db.execute("INSERT INTO items VALUES (2)")
        (end,) = db.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
        advance_slot(db, "advanced", lsn_number(middle))
        messages = peek_changes(db, "advanced", "capture", lsn_number(end))
    changes = list(PgoutputDecoder().decode(message for _, _, message in messages))
    assert [(c.op, c.after) for c in changes] == [("c", ("2",))]

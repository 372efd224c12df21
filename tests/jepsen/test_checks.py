"""Each check of tests/jepsen/checks.py on rows made by hand: it holds on a good history and
finds the fault it is there for (a check that cannot fail proves nothing).

  python3 -m unittest discover -s tests/jepsen -p 'test_*.py'
"""

import unittest

import checks


def entry(seq, command, frm, to, actor="d1", epoch=None, at=None, paused=(False, False), gates=()):
    fs, fstep = frm if isinstance(frm, tuple) else (frm, None)
    ts, tstep = to if isinstance(to, tuple) else (to, None)
    e = {"id": seq, "seq": seq, "generation": seq, "command": command, "actor": actor,
         "from_state": fs, "from_step": fstep, "to_state": ts, "to_step": tstep,
         "from_paused": paused[0], "to_paused": paused[1], "at": at if at is not None else seq * 1000,
         "evidence": {"gates": [{"evaluated_at_ms": g} for g in gates]}}
    if epoch is not None:
        e["epoch"] = epoch
    return e


def good():
    return [
        entry(1, "init", "planned", "planned", actor="operator", epoch=0),
        entry(2, "advance", "planned", "consume_dual", epoch=1),
        entry(3, "advance", "consume_dual", "synthetic", epoch=1),
        entry(4, "advance", "synthetic", ("slices", 0), epoch=2, actor="d2"),
        entry(5, "rollback", ("slices", 0), "synthetic", epoch=2, actor="d2", paused=(False, True)),
        entry(6, "resume", "synthetic", "synthetic", epoch=2, actor="operator", paused=(True, False)),
        entry(7, "advance", "synthetic", ("slices", 0), epoch=2, actor="d2"),
    ]


DAEMONS = {"d1", "d2"}


class Checks(unittest.TestCase):
    def test_chain(self):
        self.assertEqual(checks.chain("m", good()), [])
        j = good()
        j[3]["from_state"] = "consume_dual"  # a stale decision applied from where it was taken
        self.assertTrue(any("from" in v for v in checks.chain("m", j)))
        j = good()
        j[2]["to_state"], j[3]["from_state"] = "drain", "drain"
        self.assertTrue(any("illegal" in v for v in checks.chain("m", j)))

    def test_step_entered_twice(self):
        self.assertEqual(checks.step_entered_twice("m", good()), [])
        j = good()
        del j[4:6]  # no rollback between the two entries into slices[0]
        self.assertEqual(len(checks.step_entered_twice("m", j)), 1)

    def test_non_holder(self):
        audit = {e["id"]: {"db_ms": e["at"], "lease": {"holder": e["actor"], "epoch": e["epoch"]}}
                 for e in good()}
        self.assertEqual(checks.non_holder("m", good(), audit, DAEMONS), [])
        audit[3]["lease"] = {"holder": "d2", "epoch": 2}
        self.assertEqual(len(checks.non_holder("m", good(), audit, DAEMONS)), 1)
        # A holder is `ID#INSTANCE` (issue 54): its id is the journal's actor.
        audit = {e["id"]: {"db_ms": e["at"],
                           "lease": {"holder": e["actor"] + "#3f9c0a12b4e7", "epoch": e["epoch"]}}
                 for e in good()}
        self.assertEqual(checks.non_holder("m", good(), audit, DAEMONS), [])

    def test_epoch_audit(self):
        epochs = [{"epoch": 1, "holder": "d1"}, {"epoch": 2, "holder": "d2"}]
        self.assertEqual(checks.epoch_audit("m", good(), epochs, DAEMONS), [])
        instances = [{"epoch": 1, "holder": "d1#a1"}, {"epoch": 2, "holder": "d2#b2"}]
        self.assertEqual(checks.epoch_audit("m", good(), instances, DAEMONS), [])
        j = good()
        j[6]["epoch"], j[6]["actor"] = 1, "d1"  # d1 writes under its old epoch after d2's
        found = checks.epoch_audit("m", j, epochs, DAEMONS)
        self.assertTrue(any("after a row of epoch 2" in v for v in found), found)
        self.assertTrue(checks.epoch_audit("m", [{k: v for k, v in e.items() if k != "epoch"}
                                                 for e in good()], epochs, DAEMONS))

    def test_stale_readings(self):
        j = good()
        j[3]["evidence"] = {"gates": [{"evaluated_at_ms": 3_500}]}
        start = {1: 1_000, 2: 3_000}
        self.assertEqual(checks.stale_readings("m", j, lambda e: start.get(e.get("epoch")),
                                               lambda e, t: t, DAEMONS), [])
        start[2] = 4_000  # the reading was taken before d2's lease began
        self.assertEqual(len(checks.stale_readings("m", j, lambda e: start.get(e.get("epoch")),
                                                   lambda e, t: t, DAEMONS)), 1)

    def test_journal_on_db_clock(self):
        audit = {e["id"]: {"db_ms": e["at"]} for e in good()}
        self.assertEqual(checks.journal_on_db_clock("m", good(), audit), [])
        j = good()
        j[4]["at"] = j[4]["at"] + 7_200_000
        self.assertEqual(len(checks.journal_on_db_clock("m", j, audit)), 2)  # off, then back

    def test_two_ready(self):
        s = [(0.0, {"d1": True, "d2": False}), (0.1, {"d1": False, "d2": True})]
        self.assertEqual(checks.two_ready(s), [])
        s.insert(1, (0.05, {"d1": True, "d2": True}))
        self.assertEqual(len(checks.two_ready(s)), 1)

    def test_routing_monotonic(self):
        j = {"m": good()}
        self.assertEqual(checks.routing_monotonic([(0, "m", 3), (1, "m", 7)], j), [])
        self.assertEqual(len(checks.routing_monotonic([(0, "m", 5), (1, "m", 4)], j)), 1)
        self.assertEqual(len(checks.routing_monotonic([(0, "m", 8)], j)), 1)

    def test_takeovers(self):
        ok = {"fault": "kill -9", "leader": "d1", "skew": "0", "took": 3.2, "waited": 3.2}
        self.assertEqual(checks.takeovers([ok], 3.8), [])
        self.assertEqual(len(checks.takeovers([dict(ok, took=4.1)], 3.8)), 1)
        self.assertEqual(len(checks.takeovers([dict(ok, took=None, waited=12)], 3.8)), 1)

    def test_webhooks(self):
        j = {"m": good()}

        def hook(who, seq, to, gen, key=None, epoch=1):
            return (0, who, key, {"event": "transition", "migration": "m", "epoch": epoch,
                                  "details": {"seq": seq, "to": to, "generation": gen}})

        once = [hook("d1", 2, "consume_dual", 2, "k2"), hook("d2", 2, "consume_dual", 2, "k2")]
        self.assertEqual(checks.webhooks(once, j, True), [])
        twice = [hook("d1", 2, "consume_dual", 2), hook("d2", 2, "consume_dual", 2)]
        self.assertEqual(len(checks.webhooks(twice, j, False)), 1)
        self.assertEqual(len(checks.webhooks(twice, j, True)), 2)  # and no id at all
        ghost = [hook("d1", 3, "slices[0]", 3, "k3")]  # a refused write announced
        self.assertEqual(len(checks.webhooks(ghost, j, True)), 1)

    def test_ms(self):
        self.assertEqual(checks.ms(1_796_391_877_000), 1_796_391_877_000)
        self.assertEqual(checks.ms(1_796_391_877), 1_796_391_877_000)
        self.assertEqual(checks.ms("2026-12-04T13:44:37+00:00"), 1_796_391_877_000)
        self.assertEqual(checks.ms("2026-12-04T13:44:37.5+00"), 1_796_391_877_500)

    # ---- the newer faults' checks (issue 54) --------------------------------------------------

    def test_within(self):
        self.assertEqual(checks.within("breach acted on", 4.0, 9.0), [])
        self.assertEqual(len(checks.within("breach acted on", 9.5, 9.0)), 1)
        self.assertEqual(len(checks.within("breach acted on", None, 9.0)), 1)

    def test_ready_without_rounds(self):
        samples = [(t / 10, {"d1": True, "d2": False}) for t in range(0, 100)]
        asks = [(t / 2, "d1", "app_error_ratio_new", 0.0) for t in range(0, 20)]  # every 0.5 s
        self.assertEqual(checks.ready_without_rounds(samples, asks, [(0, 10)], 3.0), [])
        # d1 stops asking at 4 s and stays ready: a zombie leader.
        zombie = [a for a in asks if a[0] < 4]
        self.assertEqual(len(checks.ready_without_rounds(samples, zombie, [(0, 10)], 3.0)), 1)
        # Outside the fault's window it is not this check's business.
        self.assertEqual(checks.ready_without_rounds(samples, zombie, [(0, 6)], 3.0), [])
        # Ready again after a break: a new episode, judged afresh.
        broken = [(t, {"d1": not 4 < t < 8}) for t, _ in samples]
        self.assertEqual(checks.ready_without_rounds(broken, zombie, [(0, 10)], 3.0), [])

    def test_shared_epoch(self):
        def h(who, epoch):
            return (0, who, "m:2", {"event": "transition", "epoch": epoch})
        self.assertEqual(checks.shared_epoch([h("d1", 3), h("d1r", 4), h("d1", 3)], {"d1", "d1r"}), [])
        self.assertEqual(len(checks.shared_epoch([h("d1", 3), h("d1r", 3)], {"d1", "d1r"})), 1)
        self.assertEqual(checks.shared_epoch([h("d1", 3), h("cli", 3)], {"d1"}), [])

    def test_undelivered(self):
        rows = [{"migration": "m", "seq": 2, "delivered_at": 5}, {"migration": "m", "seq": 3, "delivered_at": 6}]
        hooks = [(0, "d1", "m:2", {}), (0, "d2", None, {"idempotency_key": "m:3"})]
        self.assertEqual(checks.undelivered(rows, hooks), [])
        self.assertEqual(len(checks.undelivered(rows, hooks[:1])), 1)
        self.assertEqual(len(checks.undelivered([dict(rows[0], delivered_at=None)], hooks)), 1)

    def test_epoch_per_acquisition(self):
        def ch(old, new):
            return {"old": old and {"holder": old[0], "epoch": old[1]},
                    "new": new and {"holder": new[0], "epoch": new[1]}}
        good = [ch(None, ("d1#a", 1)), ch(("d1#a", 1), ("d1#b", 2)), ch(("d1#b", 2), ("d1#b", 2)),
                ch(("d1#b", 2), ("d2#c", 3))]
        self.assertEqual(checks.epoch_per_acquisition(good), [])
        # The same --id, another process, the same epoch: the fence cannot tell them apart.
        bad = good[:1] + [ch(("d1#a", 1), ("d1#b", 1))]
        self.assertEqual(len(checks.epoch_per_acquisition(bad)), 1)

    def test_overlaps(self):
        self.assertEqual(checks.overlaps([1.0, 1.1, 1.2, 5.0], 0.5), [])
        self.assertEqual(len(checks.overlaps([1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 5.0], 0.5)), 1)

    def test_lost(self):
        self.assertEqual(checks.lost([1, 2, 3], [3, 1, 2, 2]), [])
        self.assertEqual(len(checks.lost([1, 2, 3], [1, 3])), 1)


if __name__ == "__main__":
    unittest.main()

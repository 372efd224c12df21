use proptest::prelude::*;

use super::*;

fn full() -> Ladder {
    Ladder::new(&PhaseKind::ALL, &[6, 32, 64, 128], 128)
}

fn at(state: State) -> Snapshot {
    Snapshot {
        state,
        paused: false,
    }
}

fn advance() -> Command {
    Command::Advance { confirm: None }
}

#[test]
fn ladder_climbs_every_phase_and_step_in_order() {
    use State::*;
    assert_eq!(
        full().rungs(),
        &[
            Planned,
            ConsumeDual,
            Synthetic,
            Slices(0),
            Slices(1),
            Slices(2),
            Slices(3),
            Drain,
            Disconnect,
            Complete
        ]
    );
}

#[test]
fn routing_follows_the_design_table() {
    use State::*;
    let l = full();
    let table = [
        (Planned, vec![Side::Old], 0),
        (ConsumeDual, vec![Side::Old, Side::New], 0),
        (Synthetic, vec![Side::Old, Side::New], 0),
        (Slices(0), vec![Side::Old, Side::New], 6),
        (Slices(2), vec![Side::Old, Side::New], 64),
        (Drain, vec![Side::Old, Side::New], 128),
        (Disconnect, vec![Side::New], 128),
        (Complete, vec![Side::New], 128),
    ];
    for (state, consume, migrated) in table {
        let r = l.routing(state);
        assert_eq!(r.consume, consume, "{state}");
        assert_eq!(r.slices_migrated, migrated, "{state}");
        assert_eq!(r.slices_total, 128);
    }
}

#[test]
fn rollback_rules_of_design_4() {
    use State::*;
    let l = full();
    let back = |s| {
        handle(
            &l,
            "orders",
            at(s),
            &Command::Rollback { then_pause: false },
        )
        .map(|t| t.to.state)
    };
    assert_eq!(back(Slices(0)), Ok(Synthetic));
    assert_eq!(back(Slices(3)), Ok(Slices(2)));
    assert_eq!(back(Drain), Ok(Slices(3)));
    assert_eq!(back(Disconnect), Ok(Drain));
    assert_eq!(back(ConsumeDual), Ok(Planned));
    assert_eq!(back(Planned), Err(MachineError::NothingToRollBack));
    assert_eq!(back(Complete), Err(MachineError::Complete));
}

#[test]
fn omitted_phases_are_skipped_both_ways() {
    use State::*;
    let l = Ladder::new(&[PhaseKind::ConsumeDual, PhaseKind::Slices], &[2, 4], 4);
    assert_eq!(
        l.rungs(),
        &[Planned, ConsumeDual, Slices(0), Slices(1), Complete]
    );
    assert_eq!(l.prev(Slices(0)), Some(ConsumeDual));
    assert_eq!(l.next(Slices(1)), Some(Complete));
    // Without consume_dual, slices[0] rolls back to a dual-read state, not to planned.
    let bare = Ladder::new(&[PhaseKind::Slices], &[2, 4], 4);
    assert_eq!(bare.prev(Slices(0)), Some(ConsumeDual));
    assert_eq!(bare.prev(ConsumeDual), Some(Planned));
}

#[test]
fn entering_complete_needs_the_name() {
    let l = full();
    let err = handle(&l, "orders", at(State::Disconnect), &advance()).unwrap_err();
    assert_eq!(
        err,
        MachineError::ConfirmationRequired {
            name: "orders".into()
        }
    );
    let wrong = Command::Advance {
        confirm: Some("other".into()),
    };
    assert!(handle(&l, "orders", at(State::Disconnect), &wrong).is_err());
    let right = Command::Advance {
        confirm: Some("orders".into()),
    };
    let t = handle(&l, "orders", at(State::Disconnect), &right).unwrap();
    assert_eq!(t.to.state, State::Complete);
}

#[test]
fn paused_blocks_advance_but_not_rollback() {
    let l = full();
    let paused = Snapshot {
        state: State::Slices(1),
        paused: true,
    };
    assert_eq!(
        handle(&l, "o", paused, &advance()),
        Err(MachineError::Paused)
    );
    let t = handle(&l, "o", paused, &Command::Rollback { then_pause: false }).unwrap();
    assert_eq!(
        t.to,
        Snapshot {
            state: State::Slices(0),
            paused: true
        }
    );
}

#[test]
fn breach_rollback_pauses() {
    let t = handle(
        &full(),
        "o",
        at(State::Slices(2)),
        &Command::Rollback { then_pause: true },
    )
    .unwrap();
    assert_eq!(
        t.to,
        Snapshot {
            state: State::Slices(1),
            paused: true
        }
    );
}

#[test]
fn abort_sends_every_slice_back_and_keeps_dual_consumption() {
    let l = full();
    for from in [State::Slices(3), State::Drain, State::Disconnect] {
        let t = handle(&l, "o", at(from), &Command::Abort).unwrap();
        assert_eq!(t.to.state, State::Synthetic);
        assert!(t.to.paused);
        assert_eq!(t.routing.slices_migrated, 0);
        assert_eq!(t.routing.consume, vec![Side::Old, Side::New]);
    }
    assert!(handle(&l, "o", at(State::Planned), &Command::Abort).is_err());
}

#[test]
fn abort_without_dual_phases_still_reads_both() {
    let l = Ladder::new(&[PhaseKind::Slices], &[1, 2], 2);
    let t = handle(&l, "o", at(State::Slices(1)), &Command::Abort).unwrap();
    assert_eq!(t.to.state, State::ConsumeDual);
    assert_eq!(t.routing.consume, vec![Side::Old, Side::New]);
    // From there the ladder goes on where the plan does.
    let resumed = Snapshot {
        state: State::ConsumeDual,
        paused: false,
    };
    let t = handle(&l, "o", resumed, &advance()).unwrap();
    assert_eq!(t.to.state, State::Slices(0));
}

#[test]
fn pause_and_resume_are_not_idempotent_silently() {
    let l = full();
    let p = handle(&l, "o", at(State::Synthetic), &Command::Pause).unwrap();
    assert!(p.to.paused);
    assert_eq!(
        handle(&l, "o", p.to, &Command::Pause),
        Err(MachineError::AlreadyPaused)
    );
    assert_eq!(
        handle(&l, "o", at(State::Synthetic), &Command::Resume),
        Err(MachineError::NotPaused)
    );
}

#[test]
fn a_step_past_the_plan_is_refused() {
    assert_eq!(
        handle(&full(), "o", at(State::Slices(9)), &Command::Pause),
        Err(MachineError::UnknownState {
            state: State::Slices(9)
        })
    );
}

#[test]
fn state_names_round_trip() {
    for s in full().rungs() {
        assert_eq!(State::from_parts(s.name(), s.step()), Some(*s));
    }
    assert_eq!(State::from_parts("slices", None), None);
    assert_eq!(State::from_parts("bogus", None), None);
}

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        3 => Just(Command::Advance { confirm: Some("o".into()) }),
        1 => Just(Command::Advance { confirm: None }),
        2 => any::<bool>().prop_map(|then_pause| Command::Rollback { then_pause }),
        1 => Just(Command::Pause),
        1 => Just(Command::Resume),
        1 => Just(Command::Abort),
    ]
}

fn phases() -> impl Strategy<Value = Vec<PhaseKind>> {
    proptest::sample::subsequence(PhaseKind::ALL.to_vec(), 0..=5).prop_map(|mut v| {
        if !v.contains(&PhaseKind::Slices) {
            v.push(PhaseKind::Slices);
            v.sort();
        }
        v
    })
}

proptest! {
    #[test]
    fn any_command_sequence_keeps_the_invariants(
        kinds in phases(),
        nsteps in 1usize..6,
        cmds in proptest::collection::vec(command(), 0..60),
    ) {
        let steps: Vec<u32> = (1..=nsteps as u32).map(|i| i * 10).collect();
        let slices = *steps.last().unwrap();
        let l = Ladder::new(&kinds, &steps, slices);
        let mut cur = at(State::Planned);
        let mut last_advance_from: Option<Snapshot> = None;
        for c in &cmds {
            match handle(&l, "o", cur, c) {
                Ok(t) => {
                    prop_assert_eq!(t.from, cur);
                    // Routing always follows the table.
                    prop_assert_eq!(&t.routing, &l.routing(t.to.state));
                    // Nothing leaves complete.
                    prop_assert_ne!(cur.state, State::Complete);
                    match c {
                        Command::Advance { .. } => {
                            prop_assert!(!cur.paused, "advance while paused");
                            prop_assert!(t.to.state > cur.state);
                            prop_assert_eq!(Some(t.to.state), l.next(cur.state));
                            last_advance_from = Some(cur);
                        }
                        Command::Rollback { .. } => {
                            // Rollback right after an advance undoes it exactly.
                            if let Some(before) = last_advance_from.take() {
                                if before.state == State::Planned && cur.state > State::ConsumeDual {
                                    prop_assert_eq!(t.to.state, State::ConsumeDual);
                                } else {
                                    prop_assert_eq!(t.to.state, before.state);
                                }
                            }
                            // Consumers never stop reading new once producers may send there.
                            if cur.state > State::ConsumeDual {
                                prop_assert!(t.routing.consume.contains(&Side::New));
                            }
                            prop_assert!(t.to.state < cur.state);
                        }
                        Command::Abort => {
                            prop_assert!(t.to.paused);
                            prop_assert_eq!(t.routing.slices_migrated, 0);
                            prop_assert!(t.routing.consume.contains(&Side::Old));
                            prop_assert!(t.routing.consume.contains(&Side::New));
                            last_advance_from = None;
                        }
                        Command::Pause | Command::Resume => {
                            prop_assert_eq!(t.to.state, cur.state);
                        }
                    }
                    cur = t.to;
                }
                Err(_) => {
                    // Illegal commands change nothing (cur is untouched) and are explained.
                    if let Command::Advance { .. } = c {
                        prop_assert!(cur.paused || cur.state == State::Complete
                            || l.next(cur.state) == Some(State::Complete));
                    }
                }
            }
            prop_assert!(l.knows(cur.state));
        }
    }
}

#[test]
fn a_state_parses_back_from_what_display_writes_and_nothing_else() {
    let states = [
        State::Planned,
        State::ConsumeDual,
        State::Synthetic,
        State::Slices(0),
        State::Slices(12),
        State::Drain,
        State::Disconnect,
        State::Complete,
    ];
    for state in states {
        assert_eq!(State::parse(&state.to_string()), Some(state), "{state}");
    }
    for bad in [
        "",
        "slices",
        "slices[]",
        "slices[-1]",
        "slices[+1]",
        "slices[1",
        "Drain",
        "paused",
        "slices[01]",
        "slices[007]",
        " drain",
        "drain ",
        "slices[ 1]",
        "slices[1 ]",
    ] {
        assert_eq!(State::parse(bad), None, "{bad:?}");
    }
}

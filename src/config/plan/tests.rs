//! `config::plan`: every section's checks, on plan text.

use super::*;
use std::time::Duration;

use crate::report::Policy;

const DIGEST: &str = "sha256:0c0637959c3931829f05154087bbefd2c50003fb9b2010200ce0ec82f4d71a53";

fn parse(text: &str) -> Result<Plan, ConfigError> {
    Plan::parse(text, Path::new("plans/t.toml"), Path::new("/p"))
}

fn minimal(extra: &str) -> String {
    format!(
        "suite = \"s.toml\"\n[baseline]\ndriver = \"process\"\nengine_profile = \"baseline\"\n\
         [candidate]\ndriver = \"process\"\nengine_profile = \"candidate\"\n{extra}"
    )
}

#[test]
fn parses_the_shipped_reference_plan() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/reference.toml");
    let plan = Plan::load(&path).unwrap();
    assert!(matches!(
        plan.baseline.driver,
        Driver::Process(ProcessDriver::Engine { .. })
    ));
    assert!(plan.suite.ends_with("suites/reference-engine.toml"));
    assert!(plan.decision.is_pending());
}

#[test]
fn parses_the_shipped_cross_engine_plans() {
    for engine in ["vllm", "sglang"] {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("plans/llamacpp-to-{engine}.toml"));
        let plan = Plan::load(&path).unwrap();
        assert!(matches!(
            plan.baseline.driver,
            Driver::Process(ProcessDriver::Engine { .. })
        ));
        let Driver::Process(ProcessDriver::Command(c)) = &plan.candidate.driver else {
            panic!("{:?}", plan.candidate.driver)
        };
        // The launcher, resolved from the plan's folder, serves the port the
        // plan reads: the two must name the same one.
        assert!(
            c.command.ends_with(&format!("engine/{engine}-serve.sh")),
            "{}",
            c.command
        );
        assert!(Path::new(&c.command).is_file(), "{}", c.command);
        let port = c.args.iter().skip_while(|a| *a != "--port").nth(1).unwrap();
        assert_eq!(c.base_url, format!("http://127.0.0.1:{port}"));
        assert!(
            plan.suite
                .ends_with(format!("suites/llamacpp-to-{engine}.toml")),
            "{}",
            plan.suite.display()
        );
        assert_eq!(plan.schedule, PlanSchedule::Interleaved);
    }
}

#[test]
fn metrics_endpoints_are_named_urls_beside_the_runtimes_own() {
    let with = |extra: &str| {
        minimal("").replace(
            "engine_profile = \"candidate\"",
            &format!("engine_profile = \"candidate\"\n{extra}"),
        )
    };
    let plan = parse(&with(
        "scrape_metrics = false\nmetrics_endpoints = { dcgm = \"http://127.0.0.1:9400/metrics\" }",
    ))
    .unwrap();
    assert!(plan.baseline.scrape_metrics && plan.baseline.metrics_endpoints.is_empty());
    assert!(!plan.candidate.scrape_metrics);
    assert_eq!(
        plan.candidate.metrics_endpoints,
        vec![(
            "dcgm".to_string(),
            "http://127.0.0.1:9400/metrics".to_string()
        )]
    );
    let e = parse(&with("metrics_endpoints = { dcgm = \"127.0.0.1:9400\" }")).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("candidate.metrics_endpoints.dcgm"));
    assert_eq!(e.line, Some(8), "{e}");
    let e = parse(&with(
        "metrics_endpoints = { target = \"http://x/metrics\" }",
    ))
    .unwrap_err();
    assert!(e.message.contains("own /metrics"), "{e}");
}

#[test]
fn relative_paths_follow_the_plan_and_order_alternates() {
    let plan = parse(&format!("repeats = 2\n{}", minimal(""))).unwrap();
    assert_eq!(plan.suite, Path::new("/p/s.toml"));
    assert_eq!(
        plan.pass_order(),
        vec![(BASELINE, 1), (CANDIDATE, 1), (CANDIDATE, 2), (BASELINE, 2)]
    );
}

#[test]
fn unknown_field_names_file_line_and_field() {
    let e = parse(&minimal("").replace(
        "engine_profile = \"candidate\"",
        "engine_profile = \"candidate\"\nimgae = \"x\"",
    ))
    .unwrap_err();
    assert_eq!(e.file, "plans/t.toml");
    assert_eq!(e.line, Some(8), "{e}");
    assert_eq!(e.field.as_deref(), Some("candidate.imgae"), "{e}");
    assert!(e.message.contains("imgae"), "{e}");
}

#[test]
fn client_timeouts_come_from_the_plan_and_bad_ones_name_their_line() {
    let plan = parse(&minimal("[timeouts]\nidle_s = 5\ntotal_s = 120.5\n")).unwrap();
    let d = crate::config::timeouts::Timeouts::default();
    assert_eq!(plan.timeouts.idle, Duration::from_secs(5));
    assert_eq!(plan.timeouts.total, Duration::from_secs_f64(120.5));
    assert_eq!(
        (plan.timeouts.connect, plan.timeouts.first_byte),
        (d.connect, d.first_byte)
    );
    assert_eq!(parse(&minimal("")).unwrap().timeouts, d);

    let e = parse(&minimal("[timeouts]\nidle_s = -1\n")).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("timeouts.idle_s"), "{e}");
    assert_eq!(e.line, Some(9), "{e}");
    let e = parse(&minimal("[timeouts]\nidle = 5\n")).unwrap_err();
    assert!(e.message.contains("idle"), "{e}");

    // The prompt allowance may be zero (none), never negative.
    let plan = parse(&minimal("[timeouts]\nper_1k_prompt_tokens_s = 0\n")).unwrap();
    assert_eq!(plan.timeouts.per_1k_prompt_tokens, Duration::ZERO);
    let e = parse(&minimal("[timeouts]\nper_1k_prompt_tokens_s = -0.5\n")).unwrap_err();
    assert_eq!(
        e.field.as_deref(),
        Some("timeouts.per_1k_prompt_tokens_s"),
        "{e}"
    );
    assert_eq!(e.line, Some(9), "{e}");
}

#[test]
fn the_pull_policy_is_a_docker_word_and_always_needs_a_registry() {
    assert_eq!(
        parse(&minimal("")).unwrap().docker.pull,
        PullPolicy::Missing
    );
    for (word, policy) in [
        ("never", PullPolicy::Never),
        ("missing", PullPolicy::Missing),
        ("always", PullPolicy::Always),
    ] {
        let text = format!("[docker]\nregistry = \"registry.example\"\npull = \"{word}\"\n");
        assert_eq!(parse(&minimal(&text)).unwrap().docker.pull, policy);
    }
    let e = parse(&minimal("[docker]\npull = \"always\"\n")).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("docker.pull"), "{e}");
    assert!(e.message.contains("none is set"), "{e}");
    assert_eq!(e.line, Some(9), "{e}");
    let e = parse(&minimal("[docker]\npull = \"if-absent\"\n")).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("docker.pull"), "{e}");
    assert!(
        e.message.contains("\"missing\", \"never\" or \"always\""),
        "{e}"
    );
}

#[test]
fn relative_paths_are_shown_without_dot_components() {
    let text = minimal("").replace("\"s.toml\"", "\"./suites/./s.toml\"");
    let plan = Plan::parse(&text, Path::new("./t.toml"), Path::new(".")).unwrap();
    assert_eq!(plan.suite, Path::new("./suites/s.toml"));
    let plan = Plan::parse(&text, Path::new("/p/t.toml"), Path::new("/p/.")).unwrap();
    assert_eq!(plan.suite, Path::new("/p/suites/s.toml"));
}

#[test]
fn hooks_are_read_and_a_missing_command_or_a_secret_url_is_named() {
    let plan = parse(&minimal(
        "[hooks]\non_verdict = [{ command = [\"sh\", \"-c\", \"cat\"] }, { url = \"http://127.0.0.1:9/h\" }]\n",
    ))
    .unwrap();
    assert_eq!(plan.hooks.on_verdict.len(), 2);
    assert!(plan.hooks.on_decision.is_empty());
    let e = parse(&minimal(
        "[hooks]\non_decision = [{ command = [\"no-such-hook-program\"] }]\n",
    ))
    .unwrap_err();
    assert_eq!(
        e.field.as_deref(),
        Some("hooks.on_decision[0].command"),
        "{e}"
    );
    assert!(e.message.contains("not an executable file on PATH"), "{e}");
    assert_eq!(e.line, Some(9), "{e}");
    let e = parse(&minimal(
        "[hooks]\non_verdict = [{ url = \"http://u:hunter2@127.0.0.1:9/h\" }]\n",
    ))
    .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("hooks.on_verdict[0].url"), "{e}");
    assert!(!e.to_string().contains("hunter2"), "{e}");
    let e = parse(&minimal("[hooks]\non_verdict = [{ }]\n")).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("hooks.on_verdict[0]"), "{e}");
}

#[test]
fn wrong_type_names_the_field_path() {
    let e = parse(&minimal("[readmission]\ncanary = \"yes\"\n")).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("readmission.canary"), "{e}");
    assert_eq!(e.line, Some(9), "{e}");
}

#[test]
fn container_image_must_be_pinned_by_digest() {
    let text = minimal("").replace(
        "driver = \"process\"\nengine_profile = \"candidate\"",
        "driver = \"container\"\nimage = \"ghcr.io/o/e:latest\"\nport = 8080",
    );
    let e = parse(&text).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("candidate.image"));
    assert_eq!(e.line, Some(7), "{e}");
    assert!(e.message.contains("not pinned by digest"), "{e}");

    let ok = parse(&text.replace("ghcr.io/o/e:latest", &format!("ghcr.io/o/e@{DIGEST}"))).unwrap();
    let Driver::Container(c) = &ok.candidate.driver else {
        panic!()
    };
    assert_eq!(c.image.repository.as_deref(), Some("ghcr.io/o/e"));
    assert_eq!(c.image.to_string(), format!("ghcr.io/o/e@{DIGEST}"));
    assert!(ImageRef::parse(DIGEST).unwrap().repository.is_none());
    assert!(ImageRef::parse(&format!("e:1.0@{DIGEST}")).is_err());
}

#[test]
fn driver_fields_do_not_mix() {
    let e = parse(&minimal("").replace(
        "engine_profile = \"candidate\"",
        "engine_profile = \"candidate\"\nport = 1",
    ))
    .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("candidate.port"), "{e}");
    assert_eq!(e.line, Some(8), "{e}");
    let e = parse(&minimal("").replace("engine_profile = \"candidate\"", "command = \"x\""))
        .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("candidate.base_url"), "{e}");
}

#[test]
fn inline_policy_is_checked_at_load() {
    let e = parse(&minimal("[policy]\nthreshold_percent = \"five\"\n")).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("policy"), "{e}");
    let ok = parse(&minimal("[policy]\nthreshold_percent = 3\n")).unwrap();
    // A policy has sections: an inline one may too.
    let nested = parse(&minimal(
        "[policy.gate]\nalpha = 0.1\n[policy.quality]\ncross_runtime = \"near_tie\"\n",
    ))
    .unwrap();
    let PolicySource::Inline(text) = &nested.policy else {
        panic!("{:?}", nested.policy)
    };
    let p = Policy::from_toml_str(text, "inline").unwrap();
    assert_eq!(p.gate.alpha, 0.1);
    assert_eq!(p.quality.cross_runtime.as_str(), "near_tie");
    let e = parse(&format!("policy = 3\n{}", minimal(""))).unwrap_err();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(1), Some("policy")),
        "{e:?}"
    );
    assert!(matches!(ok.policy, PolicySource::Inline(_)));
}

#[test]
fn hook_timeout_out_of_range_is_an_error_not_a_panic() {
    for bad in ["1e300", "-1", "0", "nan", "inf"] {
        let e = parse(&minimal(&format!(
            "[readmission]\nhook = {{ command = [\"true\"], timeout_s = {bad} }}\n"
        )))
        .unwrap_err();
        assert_eq!(
            e.field.as_deref(),
            Some("readmission.hook.timeout_s"),
            "{e}"
        );
        assert_eq!(e.line, Some(9), "{e}");
    }
    let ok = parse(&minimal(
        "[readmission]\nhook = { command = [\"true\"], timeout_s = 2.5 }\n",
    ))
    .unwrap();
    assert!(matches!(
        ok.readmission.hook,
        Some(Hook::Command { timeout, .. }) if timeout == Duration::from_millis(2500)
    ));
}

#[test]
fn toml_errors_always_have_a_message() {
    // Found by fuzzing: a control character in a comment gave `plans/t.toml:2: `.
    let e = parse(&format!("# x\n# a\u{7}b\n{}", minimal(""))).unwrap_err();
    assert_eq!(e.line, Some(2), "{e}");
    assert!(e.message.contains("U+0007"), "{e}");
}

#[test]
fn schedule_defaults_to_interleaved_and_repeats_means_alternating() {
    let plan = parse(&minimal("")).unwrap();
    assert_eq!(plan.schedule, PlanSchedule::Interleaved);
    assert_eq!((plan.window, plan.repeats), (None, 1));
    assert_eq!(plan.adaptive, Adaptive::default());
    let plan = parse(&format!("repeats = 2\n{}", minimal(""))).unwrap();
    assert_eq!(plan.schedule, PlanSchedule::Alternating);
    let plan = parse(&format!("schedule = \"alternating\"\n{}", minimal(""))).unwrap();
    assert_eq!(
        (plan.schedule, plan.repeats),
        (PlanSchedule::Alternating, 1)
    );
    let plan = parse(&format!(
        "schedule = \"interleaved\"\nwindow = 6\n{}",
        minimal("")
    ))
    .unwrap();
    assert_eq!(
        (plan.schedule, plan.window),
        (PlanSchedule::Interleaved, Some(Window::All(6)))
    );
    // By cell: a size for each cell it names; the others keep the default.
    let plan = parse(&format!(
        "{}[window]\nconcurrent-512 = 4\n\"c1\" = 1\n",
        minimal("")
    ))
    .unwrap();
    let w = plan.window.unwrap();
    assert_eq!(
        (w.of("concurrent-512"), w.of("c1"), w.of("other")),
        (Some(4), Some(1), None)
    );
    assert!(w.check_cells(["concurrent-512", "c1", "other"]).is_ok());
    let why = w.check_cells(["concurrent-512", "c2"]).unwrap_err();
    assert!(
        why.contains("c1") && why.contains("its cells: concurrent-512, c2"),
        "{why}"
    );
    assert_eq!(default_window(1, true), 1);
    assert_eq!(default_window(1, false), 4);
    assert_eq!(default_window(2, true), 4);
    assert_eq!(default_window(8, true), 16);
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/reference.toml");
    let shipped = Plan::load(&shipped).unwrap();
    assert_eq!(shipped.schedule, PlanSchedule::Interleaved);
    // The demo runs adaptive: rounds until the evidence decides.
    assert!(shipped.adaptive.enabled);
}

#[test]
fn schedule_errors_name_line_and_field() {
    let e = parse(&format!("schedule = \"zigzag\"\n{}", minimal(""))).unwrap_err();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(1), Some("schedule")),
        "{e}"
    );
    assert!(e.message.contains("zigzag"), "{e}");
    let e = parse(&format!(
        "schedule = \"interleaved\"\nrepeats = 2\n{}",
        minimal("")
    ))
    .unwrap_err();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(2), Some("repeats")),
        "{e}"
    );
    let e = parse(&format!(
        "schedule = \"alternating\"\nwindow = 4\n{}",
        minimal("")
    ))
    .unwrap_err();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(2), Some("window")),
        "{e}"
    );
    let e = parse(&format!("\nwindow = 0\n{}", minimal(""))).unwrap_err();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(2), Some("window")),
        "{e}"
    );
    // A bad size by cell names the cell and its line.
    let e = parse(&format!("{}[window]\nc1 = 0\n", minimal(""))).unwrap_err();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(9), Some("window.c1")),
        "{e}"
    );
    let e = parse(&format!("{}[window]\n", minimal(""))).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("window"), "{e}");
    let e = parse(&format!("window = \"4\"\n{}", minimal(""))).unwrap_err();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(1), Some("window")),
        "{e}"
    );
}

#[test]
fn runtimes_on_one_fixed_port_cannot_interleave() {
    let cmd = |port: u16| {
        format!("driver = \"process\"\ncommand = \"srv\"\nbase_url = \"http://127.0.0.1:{port}\"")
    };
    let two = |a: &str, b: &str, top: &str| {
        format!("{top}suite = \"s.toml\"\n[baseline]\n{a}\n[candidate]\n{b}\n")
    };
    let plan = parse(&two(
        &cmd(9000),
        &cmd(9000).replace("127.0.0.1", "localhost"),
        "",
    ))
    .unwrap();
    assert_eq!(plan.schedule, PlanSchedule::Alternating);
    let plan = parse(&two(&cmd(9000), &cmd(9001), "")).unwrap();
    assert_eq!(plan.schedule, PlanSchedule::Interleaved);
    let e = parse(&two(&cmd(9000), &cmd(9000), "schedule = \"interleaved\"\n")).unwrap_err();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(1), Some("schedule")),
        "{e}"
    );
    assert!(e.message.contains("port 9000"), "{e}");
}

#[test]
fn adaptive_table_is_checked_and_needs_interleaving() {
    let plan = parse(&minimal(
        "[adaptive]\nenabled = true\nmax_requests = 64\nmax_minutes = 2.5\n",
    ))
    .unwrap();
    assert_eq!(
        plan.adaptive,
        Adaptive {
            enabled: true,
            max_requests: 64,
            max_minutes: 2.5,
            looks_by: LooksBy::Design,
        }
    );
    let plan = parse(&minimal("[adaptive]\nlooks_by = \"budget\"\n")).unwrap();
    assert_eq!(plan.adaptive.looks_by, LooksBy::Budget);
    let plan = parse(&minimal("[adaptive]\nmax_requests = 10\n")).unwrap();
    assert!(!plan.adaptive.enabled);
    assert_eq!(plan.adaptive.max_minutes, DEFAULT_ADAPTIVE_MAX_MINUTES);
    for (bad, field, line) in [
        ("max_requests = 0", "adaptive.max_requests", 9),
        ("max_minutes = -1", "adaptive.max_minutes", 9),
        ("max_minutes = nan", "adaptive.max_minutes", 9),
        ("max_requets = 5", "adaptive.max_requets", 9),
        ("enabled = \"yes\"", "adaptive.enabled", 9),
        ("looks_by = \"time\"", "adaptive.looks_by", 9),
    ] {
        let e = parse(&minimal(&format!("[adaptive]\n{bad}\n"))).unwrap_err();
        assert_eq!(e.field.as_deref(), Some(field), "{bad}: {e}");
        assert_eq!(e.line, Some(line), "{bad}: {e}");
    }
    let e = parse(&format!(
        "schedule = \"alternating\"\n{}",
        minimal("[adaptive]\nmax_requests = 8\nenabled = true\n")
    ))
    .unwrap_err();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(11), Some("adaptive.enabled")),
        "{e}"
    );
}

#[test]
fn decision_policy_never_promotes_a_failure() {
    let e = parse(&minimal("[decision]\non_fail = \"promote\"\n")).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("decision.on_fail"));
    let e = parse(&minimal("[decision]\non_pass = \"ship-it\"\n")).unwrap_err();
    assert_eq!(e.line, Some(9), "{e}");
}

#[test]
fn a_runtime_url_with_a_password_or_a_query_is_refused_unshown() {
    let external = |url: &str| {
        minimal("").replace(
            "driver = \"process\"\nengine_profile = \"candidate\"",
            &format!("driver = \"external\"\nurl = \"{url}\""),
        )
    };
    parse(&external("http://127.0.0.1:8000")).unwrap();
    for (url, why) in [
        ("http://user:secret@127.0.0.1:8000", "holds a password"),
        ("http://127.0.0.1:8000/?token=secret", "query string"),
    ] {
        let e = parse(&external(url)).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("candidate.url"), "{e}");
        assert!(e.line.is_some(), "{e}");
        assert!(e.message.contains(why), "{e}");
        assert!(!e.to_string().contains("secret"), "{e}");
    }
    let e = parse(&minimal("").replace(
        "engine_profile = \"candidate\"",
        "engine_profile = \"candidate\"\nmetrics_endpoints = { dcgm = \"http://u:secret@127.0.0.1:9400/metrics\" }",
    ))
    .unwrap_err();
    assert!(e.message.contains("holds a password"), "{e}");
    assert!(!e.to_string().contains("secret"), "{e}");
}

#[test]
fn a_plan_name_with_a_control_character_is_refused_by_line_and_field() {
    let e = parse(&format!("name = \"p\\u001b[2J\"\n{}", minimal(""))).unwrap_err();
    assert_eq!((e.line, e.field.as_deref()), (Some(1), Some("name")), "{e}");
    assert!(
        e.message
            .starts_with("an escape (ESC) (U+001B) at character 2 is not allowed in a name"),
        "{e}"
    );
}

#[test]
fn container_host_settings_are_read_as_docker_run_takes_them() {
    let with = |extra: &str| {
        minimal("").replace(
            "driver = \"process\"\nengine_profile = \"candidate\"",
            &format!(
                "driver = \"container\"\nimage = \"ghcr.io/o/e@sha256:{}\"\nport = 30000\n{extra}",
                "a".repeat(64)
            ),
        )
    };
    let plan = parse(&with(
        "gpus = \"all\"\ndevices = [\"/dev/infiniband/uverbs0\", \"/dev/x:/dev/y:rw\"]\nshm_size = \"32g\"\n\
         ipc = \"host\"\nulimits = { memlock = -1, stack = 67108864, nofile = [1024, 65536] }\nruntime = \"nvidia\"\nuser = \"1000:1000\"",
    ))
    .unwrap();
    let Driver::Container(c) = &plan.candidate.driver else {
        panic!()
    };
    let h = &c.host;
    assert_eq!(h.gpus, Some(Gpus::All));
    assert_eq!(
        h.devices,
        [
            DeviceMapping {
                host: "/dev/infiniband/uverbs0".into(),
                container: "/dev/infiniband/uverbs0".into(),
                permissions: "rwm".into()
            },
            DeviceMapping {
                host: "/dev/x".into(),
                container: "/dev/y".into(),
                permissions: "rw".into()
            }
        ]
    );
    assert_eq!(h.shm_size, Some(32 << 30));
    assert_eq!(h.ipc.as_deref(), Some("host"));
    let limits: Vec<(&str, i64, i64)> = h
        .ulimits
        .iter()
        .map(|u| (u.name.as_str(), u.soft, u.hard))
        .collect();
    assert_eq!(
        limits,
        [
            ("memlock", -1, -1),
            ("nofile", 1024, 65536),
            ("stack", 67108864, 67108864)
        ]
    );
    assert_eq!(h.runtime.as_deref(), Some("nvidia"));
    assert_eq!(h.user.as_deref(), Some("1000:1000"));
    for (text, want) in [
        ("gpus = 2", Gpus::Count(2)),
        (
            "gpus = [0, \"GPU-8f6c\"]",
            Gpus::Ids(vec!["0".into(), "GPU-8f6c".into()]),
        ),
    ] {
        let plan = parse(&with(text)).unwrap();
        let Driver::Container(c) = &plan.candidate.driver else {
            panic!()
        };
        assert_eq!(c.host.gpus.as_ref(), Some(&want), "{text}");
    }
    for (text, field, why) in [
        ("gpus = 0", "gpus", "expected \"all\""),
        ("gpus = \"some\"", "gpus", "expected \"all\""),
        ("gpus = [\"0;rm\"]", "gpus", "GPU index or UUID"),
        ("devices = [\"dev/x\"]", "devices", "absolute device paths"),
        ("devices = [\"/dev/x:/dev/y:rwx\"]", "devices", "r, w and m"),
        (
            "devices = [\"/dev/../etc/shadow\"]",
            "devices",
            "not a normal path",
        ),
        (
            "devices = [\"/dev/x:/dev//y\"]",
            "devices",
            "not a normal path",
        ),
        ("shm_size = \"32q\"", "shm_size", "a size such as"),
        ("shm_size = \"9999g\"", "shm_size", "larger than 1 TiB"),
        ("ipc = \"container:x\"", "ipc", "\"shareable\""),
        (
            "ulimits = { core = 0 }",
            "ulimits",
            "memlock, stack or nofile",
        ),
        (
            "ulimits = { nofile = [2, 1] }",
            "ulimits",
            "above the hard limit",
        ),
        ("runtime = \"nv idia\"", "runtime", "runtime name"),
        ("user = \"\"", "user", "USER or USER:GROUP"),
    ] {
        let e = parse(&with(text)).unwrap_err();
        assert_eq!(
            e.field.as_deref(),
            Some(format!("candidate.{field}").as_str()),
            "{text}: {e}"
        );
        assert_eq!(e.line, Some(9), "{text}: {e}");
        assert!(e.message.contains(why), "{text}: {e}");
    }
}

#[test]
fn a_watched_tag_replaces_only_the_candidates_image() {
    let old = format!("127.0.0.1:5000/engine@sha256:{}", "a".repeat(64));
    let new = format!("127.0.0.1:5000/engine@sha256:{}", "b".repeat(64));
    let text = format!(
        "name = \"w\"\nsuite = \"s.toml\"\n# the candidate\n[baseline]\ndriver = \"container\"\nimage = \"{old}\"\nport = 8001\n[candidate]\ndriver = \"container\"\nimage = \"{old}\"  # replaced by watch\nport = 8000\n"
    );
    let path = Path::new("/plans/p.toml");
    let out = Plan::with_image(&text, path, CANDIDATE, &new).unwrap();
    assert_eq!(
        out,
        text.replacen(
            &format!("image = \"{old}\"  #"),
            &format!("image = \"{new}\"  #"),
            1
        )
    );
    let plan = Plan::parse(&out, path, Path::new("/plans")).unwrap();
    let image = |rt: &Runtime| match &rt.driver {
        Driver::Container(c) => c.image.to_string(),
        d => panic!("{d:?}"),
    };
    assert_eq!(
        (image(&plan.baseline), image(&plan.candidate)),
        (old.clone(), new.clone())
    );

    let e = Plan::with_image(&text, path, CANDIDATE, "127.0.0.1:5000/engine:nightly").unwrap_err();
    assert_eq!(e.field.as_deref(), Some("candidate.image"));
    assert!(e.message.contains("not pinned by digest"), "{e}");
    let process = minimal("");
    let e = Plan::with_image(&process, path, CANDIDATE, &new).unwrap_err();
    assert!(e.message.contains("driver = \"container\""), "{e}");
}

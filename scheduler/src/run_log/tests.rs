use super::*;

#[test]
fn the_buffer_keeps_the_first_lines_then_a_marker() {
    let buffer = RunLogBuffer::new(7);
    for i in 0..MAX_LINES + 10 {
        buffer.push(&format!("line {i}\n"));
    }
    let first = buffer.take(false).expect("lines waiting");
    assert_eq!(first.lines as usize, MAX_LINES);
    assert!(!first.truncated);
    assert!(first.text.starts_with("line 0\n"));
    let last = buffer.take(true).expect("the marker");
    assert_eq!((last.seq, last.lines, last.truncated), (1, 1, true));
    assert!(last.text.contains("10 more lines"), "{}", last.text);
    buffer.push("after the end\n");
    assert!(buffer.take(true).is_none());
}

#[test]
fn lines_carry_level_target_message_and_fields_without_nul() {
    use tracing_subscriber::prelude::*;
    let lines = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&lines);
    let subscriber = tracing_subscriber::registry().with(FormatProbe(seen));
    tracing::subscriber::with_default(subscriber, || {
        tracing::warn!(target: "app::sync", page = 3, who = "a\0b", "synced {}", "x");
    });
    let lines = lines.lock().unwrap();
    let line = lines[0].split_once(' ').unwrap().1;
    assert_eq!(line, " WARN app::sync: synced x page=3 who=a\\0b\n");
}

#[test]
fn secrets_in_lines_are_redacted() {
    let at = chrono::Utc::now();
    let line = write_line(
        at,
        &tracing::Level::INFO,
        "app",
        "connecting to postgres://app:hunter2@db/jobs dsn=\"host=db password=hunter3\" api_key=hunter4",
    );
    for secret in ["hunter2", "hunter3", "hunter4"] {
        assert!(!line.contains(secret), "{line}");
    }
    assert!(line.contains("postgres://app:***@db/jobs"), "{line}");
}

struct FormatProbe(Arc<Mutex<Vec<String>>>);

impl<S: Subscriber> Layer<S> for FormatProbe {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        self.0.lock().unwrap().push(format_line(event));
    }
}

#[test]
fn the_byte_bound_cuts_too() {
    let buffer = RunLogBuffer::new(1);
    let line = format!("{}\n", "x".repeat(100 * 1024 - 1));
    for _ in 0..3 {
        buffer.push(&line);
    }
    let chunk = buffer.take(true).unwrap();
    assert_eq!(chunk.lines, 3, "two lines and the marker");
    assert!(chunk.text.contains("1 more lines (102400 bytes)"));
}

//! The `--log-format text` line: `TIME LEVEL span: message field=value …`, each field
//! once. tracing-subscriber's compact format appends every enclosing span's fields after
//! the event's, so an event that names its plugin inside the `event` span (which names
//! it too) would print `plugin="x" … plugin="x"`. Here the event's own fields come
//! first and a span field is printed only when no nearer field has the same name.
//!
//! Every message and value is written inert: control characters escaped (`\n`,
//! `\u{1b}`), so text a plugin supplied (a log line, an error it returned, an object's
//! name) can neither forge a line of its own nor drive the operator's terminal.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// Fields as `(name, rendered value)`, in recording order.
#[derive(Default, Debug)]
struct Fields(Vec<(&'static str, String)>);

/// `value` with its control characters escaped (see the module documentation).
fn inert(value: String) -> String {
    match kubewasm::core::excerpt::excerpt(&value, usize::MAX) {
        std::borrow::Cow::Borrowed(_) => value,
        std::borrow::Cow::Owned(escaped) => escaped,
    }
}

impl Fields {
    fn set(&mut self, name: &'static str, value: String) {
        let value = inert(value);
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.0.push((name, value)),
        }
    }

    fn has(&self, name: &str) -> bool {
        self.0.iter().any(|(n, _)| *n == name)
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field.name(), format!("{value:?}"));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.set(field.name(), format!("{value:?}"));
    }
}

/// Keeps each span's fields, structured, in the span's extensions (the fmt layer keeps
/// them only as one pre-rendered string).
pub struct SpanFields;

impl<S> Layer<S> for SpanFields
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            let mut ext = span.extensions_mut();
            match ext.get_mut::<Fields>() {
                Some(fields) => values.record(fields),
                None => {
                    let mut fields = Fields::default();
                    values.record(&mut fields);
                    ext.insert(fields);
                }
            }
        }
    }
}

/// The text event format (needs [`SpanFields`] in the subscriber).
pub struct Text;

fn level_style(level: Level) -> &'static str {
    match level {
        Level::ERROR => "\x1b[31m",
        Level::WARN => "\x1b[33m",
        Level::INFO => "\x1b[32m",
        Level::DEBUG => "\x1b[34m",
        Level::TRACE => "\x1b[35m",
    }
}

impl<S, N> FormatEvent<S, N> for Text
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let ansi = writer.has_ansi_escapes();
        if SystemTime.format_time(&mut writer).is_err() {
            writer.write_str("<unknown time>")?;
        }
        let level = *event.metadata().level();
        if ansi {
            write!(writer, " {}{level:>5}\x1b[0m ", level_style(level))?;
        } else {
            write!(writer, " {level:>5} ")?;
        }
        let scope: Vec<_> = ctx
            .event_scope()
            .map(|s| s.from_root().collect())
            .unwrap_or_default();
        for span in &scope {
            write!(writer, "{}:", span.name())?;
        }
        if !scope.is_empty() {
            writer.write_char(' ')?;
        }

        let mut fields = Fields::default();
        event.record(&mut fields);
        let mut shown = Fields::default();
        if let Some((_, message)) = fields.0.iter().find(|(n, _)| *n == "message") {
            // The message was recorded as Debug of fmt::Arguments: it is the plain text.
            writer.write_str(message)?;
        }
        for (name, value) in fields.0.into_iter().filter(|(n, _)| *n != "message") {
            write!(writer, " {name}={value}")?;
            shown.set(name, String::new());
        }
        // Nearest span first, so an inner span's value wins over an outer one's.
        for span in scope.iter().rev() {
            let ext = span.extensions();
            let Some(span_fields) = ext.get::<Fields>() else {
                continue;
            };
            for (name, value) in &span_fields.0 {
                if !shown.has(name) {
                    write!(writer, " {name}={value}")?;
                    shown.set(name, String::new());
                }
            }
        }
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            if let Ok(mut v) = self.0.lock() {
                v.extend_from_slice(b);
            }
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn span_fields_the_event_names_are_printed_once() {
        let buf = Buf::default();
        let out = buf.clone();
        let subscriber = tracing_subscriber::registry().with(SpanFields).with(
            tracing_subscriber::fmt::layer()
                .event_format(Text)
                .with_ansi(false)
                .with_writer(move || out.clone()),
        );
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("event", plugin = "p", object = %"ConfigMap a/b", event = "added");
            let _g = span.enter();
            tracing::info!(plugin = "p", object = %"ConfigMap a/b", n = 3, "hello {}", "world");
        });
        let text = String::from_utf8(buf.0.lock().map(|v| v.clone()).unwrap_or_default())
            .unwrap_or_default();
        assert!(
            text.contains(
                " INFO event: hello world plugin=\"p\" object=ConfigMap a/b n=3 event=\"added\""
            ),
            "{text}"
        );
        assert_eq!(text.matches("plugin=").count(), 1, "{text}");
    }

    /// A plugin's text in the message or a field (Display-recorded: not escaped by
    /// Debug) cannot start a line of its own or reach the terminal as an escape.
    #[test]
    fn control_characters_of_messages_and_fields_are_escaped() {
        let buf = Buf::default();
        let out = buf.clone();
        let subscriber = tracing_subscriber::registry().with(SpanFields).with(
            tracing_subscriber::fmt::layer()
                .event_format(Text)
                .with_ansi(false)
                .with_writer(move || out.clone()),
        );
        let forged = "ok\n2026-12-02T00:00:00Z  INFO forged=\"yes\"\u{1b}[2J\u{1b}]0;owned\u{7}";
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("event", object = %forged);
            let _g = span.enter();
            tracing::info!(target: "plugin", reason = %forged, "{forged}");
        });
        let text = String::from_utf8(buf.0.lock().map(|v| v.clone()).unwrap_or_default())
            .unwrap_or_default();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text:?}"
        );
        assert_eq!(text.matches(r"\u{1b}[2J").count(), 3, "{text}");
        assert!(text.contains(r"ok\n2026-12-02"), "{text}");
    }
}

//! The sandbox's mail server, as Mailpit is for development: it accepts
//! SMTP on a local port (the protocol is `mailin`'s, through
//! `mailin-embedded`) and keeps every message it received, for the
//! sandbox's `/mail` page and for tests. Nothing leaves the machine.

use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};

use actix_web::{HttpResponse, web};
use mailin_embedded::{Handler, Response, Server, response};

/// A message as it arrived: the envelope and the raw RFC 5322 text.
#[derive(Debug, Clone)]
pub struct Received {
    pub from: String,
    pub to: Vec<String>,
    pub raw: Vec<u8>,
}

impl Received {
    /// The subject, decoded (a subject with `€` travels encoded).
    pub fn subject(&self) -> String {
        mail_parser::MessageParser::default()
            .parse(&self.raw)
            .and_then(|m| m.subject().map(str::to_owned))
            .unwrap_or_else(|| self.header("Subject"))
    }

    /// A header's value (unfolded), as the list page shows it.
    pub fn header(&self, name: &str) -> String {
        let text = String::from_utf8_lossy(&self.raw);
        let mut value: Option<String> = None;
        for line in text.split("\r\n") {
            if line.is_empty() {
                break;
            }
            match &mut value {
                Some(v) if line.starts_with([' ', '\t']) => v.push_str(line.trim_start()),
                Some(_) => break,
                None => {
                    if let Some((key, rest)) = line.split_once(':')
                        && key.eq_ignore_ascii_case(name)
                    {
                        value = Some(rest.trim().to_owned());
                    }
                }
            }
        }
        value.unwrap_or_default()
    }
}

/// The mailbox every message lands in. Cheap to clone; clones share it.
#[derive(Debug, Clone, Default)]
pub struct MailSandbox {
    received: Arc<Mutex<Vec<Received>>>,
    /// Refuse every message with a temporary failure (a mail server that
    /// is down or full), to show that mail waits and is not lost.
    refusing: Arc<std::sync::atomic::AtomicBool>,
}

impl MailSandbox {
    /// Every message received so far, oldest first.
    pub fn messages(&self) -> Vec<Received> {
        self.received
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// While set, every message is refused with 451 (try again later).
    pub fn set_refusing(&self, refusing: bool) {
        self.refusing
            .store(refusing, std::sync::atomic::Ordering::SeqCst);
    }

    /// Accept SMTP on `listener` in threads of its own.
    pub fn serve(&self, listener: TcpListener) -> anyhow::Result<SocketAddr> {
        let addr = listener.local_addr()?;
        let mut server = Server::new(Session {
            mailbox: self.clone(),
            current: None,
        });
        server
            .with_name("holdfast-sandbox")
            .with_num_threads(4)
            .with_tcp_listener(listener);
        std::thread::Builder::new()
            .name("sandbox-smtp".into())
            .spawn(move || {
                if let Err(error) = server.serve() {
                    tracing::error!(%error, "the sandbox's mail server stopped");
                }
            })?;
        Ok(addr)
    }
}

/// One SMTP connection's state.
#[derive(Clone)]
struct Session {
    mailbox: MailSandbox,
    current: Option<Received>,
}

/// The most a message may carry (codes, QR images and a calendar file
/// are far smaller).
const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

impl Handler for Session {
    fn data_start(&mut self, _domain: &str, from: &str, _is8bit: bool, to: &[String]) -> Response {
        if self
            .mailbox
            .refusing
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return response::INTERNAL_ERROR;
        }
        self.current = Some(Received {
            from: from.to_owned(),
            to: to.to_vec(),
            raw: Vec::new(),
        });
        response::OK
    }

    fn data(&mut self, buf: &[u8]) -> std::io::Result<()> {
        if let Some(message) = &mut self.current {
            if message.raw.len() + buf.len() > MAX_MESSAGE_BYTES {
                return Err(std::io::Error::other("message too large"));
            }
            message.raw.extend_from_slice(buf);
        }
        Ok(())
    }

    fn data_end(&mut self) -> Response {
        match self.current.take() {
            Some(message) => {
                self.mailbox
                    .received
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .push(message);
                response::OK
            }
            None => response::INTERNAL_ERROR,
        }
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `GET /mail`: every message received, newest first.
pub async fn inbox(mailbox: web::Data<MailSandbox>) -> HttpResponse {
    let messages = mailbox.messages();
    let mut rows = String::new();
    for (n, message) in messages.iter().enumerate().rev() {
        rows.push_str(&format!(
            "<tr><td><a href=\"/mail/{n}\">{}</a></td><td>{}</td><td>{}</td></tr>",
            escape(&message.subject()),
            escape(&message.to.join(", ")),
            escape(&message.header("Date")),
        ));
    }
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header(("Cache-Control", "no-store"))
        .body(format!(
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
             <title>Sandbox mail</title></head><body><h1>Sandbox mail</h1>\
             <p>{} messages received by the sandbox's mail server; nothing left this machine.</p>\
             <table id=\"inbox\"><thead><tr><th>Subject</th><th>To</th><th>Date</th></tr></thead>\
             <tbody>{rows}</tbody></table></body></html>",
            messages.len()
        ))
}

/// `GET /mail/{n}`: one message, as it arrived (`?raw=1`), or its
/// readable text with its links.
pub async fn message(
    mailbox: web::Data<MailSandbox>,
    n: web::Path<String>,
    query: web::Query<std::collections::HashMap<String, String>>,
) -> HttpResponse {
    let found = n
        .parse::<usize>()
        .ok()
        .and_then(|n| mailbox.messages().get(n).cloned());
    let Some(message) = found else {
        return HttpResponse::NotFound()
            .content_type("text/plain; charset=utf-8")
            .body("no such message");
    };
    if query.contains_key("raw") {
        return HttpResponse::Ok()
            .content_type("message/rfc822")
            .body(message.raw);
    }
    // the text part, decoded (quoted-printable or base64 as sent)
    let text = mail_parser::MessageParser::default()
        .parse(&message.raw)
        .and_then(|parsed| parsed.body_text(0).map(|t| t.into_owned()))
        .unwrap_or_else(|| String::from_utf8_lossy(&message.raw).into_owned());
    let links: String = links(&text)
        .into_iter()
        .map(|link| {
            format!(
                "<li><a class=\"link\" href=\"{0}\">{0}</a></li>",
                escape(&link)
            )
        })
        .collect();
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header(("Cache-Control", "no-store"))
        .body(format!(
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
             <title>{subject}</title></head><body><p><a href=\"/mail\">All mail</a> · \
             <a href=\"?raw=1\">Raw</a></p><h1 id=\"subject\">{subject}</h1>\
             <p>To {to}</p><h2>Links</h2><ul id=\"links\">{links}</ul>\
             <h2>Message</h2><pre id=\"raw\">{body}</pre></body></html>",
            subject = escape(&message.subject()),
            to = escape(&message.to.join(", ")),
            body = escape(&text),
        ))
}

/// The http(s) links a message's text parts carry (the order link).
fn links(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for start in text.match_indices("http").map(|(i, _)| i) {
        let rest = &text[start..];
        if !(rest.starts_with("http://") || rest.starts_with("https://")) {
            continue;
        }
        let end = rest
            .find(|c: char| c.is_whitespace() || c == '"' || c == '<' || c == '>')
            .unwrap_or(rest.len());
        let link = rest[..end].trim_end_matches(['.', ',', ')']).to_owned();
        if !found.contains(&link) {
            found.push(link);
        }
    }
    found
}

//! One HTTP/1.1 keep-alive connection that POSTs JSON and reads the answer back.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::{SendRequest, handshake};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;

pub struct Connection {
    sender: SendRequest<Full<Bytes>>,
    authority: String,
    headers: Vec<(&'static str, String)>,
}

impl Connection {
    /// Connect to `base` (`http://host:port`); `headers` go with every request.
    pub async fn open(base: &str, headers: Vec<(&'static str, String)>) -> Result<Self, String> {
        let authority = base
            .strip_prefix("http://")
            .ok_or_else(|| format!("{base}: only http:// URLs"))?
            .trim_end_matches('/')
            .to_owned();
        let stream = TcpStream::connect(&authority)
            .await
            .map_err(|e| format!("connect {authority}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (sender, connection) = handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake {authority}: {e}"))?;
        tokio::spawn(connection);
        Ok(Self {
            sender,
            authority,
            headers,
        })
    }

    /// POST `body` to `path`; the status and the answer's bytes, for the caller to read only
    /// the fields it needs (`systems::read`).
    pub async fn post(&mut self, path: &str, body: &Value) -> Result<(u16, Bytes), String> {
        let mut request = hyper::Request::post(path)
            .header("host", &self.authority)
            .header("content-type", "application/json");
        for (name, value) in &self.headers {
            request = request.header(*name, value);
        }
        let request = request
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| e.to_string())?;
        self.sender.ready().await.map_err(|e| e.to_string())?;
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(|e| format!("POST {path}: {e}"))?;
        let status = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, bytes))
    }
}

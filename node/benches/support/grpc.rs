//! (7) The gRPC side of the load benchmark: the same turns as phases (2) and (3) — send,
//! wait for the first `content`, then `turn_complete` on the workstream's stream opened
//! before the first send — through `turnstone.v1.NodeService` on the same port (tonic
//! client over one HTTP/2 connection), so HTTP+SSE and gRPC are compared in one run.

use turnstone_grpc::client::{NodeClient, connect};
use turnstone_grpc::v1 as pb;

use super::*;

/// A workstream's event stream over gRPC.
pub struct GrpcEvents(tonic::Streaming<pb::StreamEventsResponse>);

impl GrpcEvents {
    /// Reads events up to and including one of type `kind`.
    pub async fn until(&mut self, kind: &str) -> Result<()> {
        loop {
            let item = tokio::time::timeout(READ_TIMEOUT, self.0.message())
                .await
                .map_err(|_| anyhow!("no gRPC event within {READ_TIMEOUT:?}"))??
                .ok_or_else(|| anyhow!("gRPC stream ended"))?;
            if item.event.is_some_and(|e| e.r#type == kind) {
                return Ok(());
            }
        }
    }
}

#[derive(Clone)]
pub struct Grpc(NodeClient);

impl Grpc {
    pub async fn connect(base: &str) -> Result<Self> {
        Ok(Self(connect(base, Some(TOKEN)).await?))
    }

    async fn create(&self) -> Result<String> {
        let reply = self
            .0
            .clone()
            .create_workstream(pb::CreateWorkstreamRequest::default())
            .await?;
        Ok(reply.into_inner().ws_id)
    }

    async fn subscribe(&self, ws_id: &str) -> Result<GrpcEvents> {
        let stream = self
            .0
            .clone()
            .stream_events(pb::StreamEventsRequest {
                ws_id: ws_id.to_string(),
                after_seq: None,
            })
            .await?
            .into_inner();
        let mut events = GrpcEvents(stream);
        events.until("connected").await?;
        Ok(events)
    }

    /// Starts a turn; a `busy` answer is retried (and counted).
    async fn send(&self, ws_id: &str) -> Result<()> {
        loop {
            let reply = self
                .0
                .clone()
                .send(pb::SendRequest {
                    ws_id: ws_id.to_string(),
                    message: MESSAGE.to_string(),
                    ..pb::SendRequest::default()
                })
                .await?
                .into_inner();
            match reply.status.as_str() {
                "ok" => return Ok(()),
                "busy" => {
                    BUSY_RETRIES.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
                other => bail!("gRPC send: {other} {:?}", reply.reason),
            }
        }
    }

    async fn clear(&self, ws_id: &str) -> Result<()> {
        self.0
            .clone()
            .command(pb::CommandRequest {
                ws_id: ws_id.to_string(),
                command: "/clear".into(),
            })
            .await?;
        Ok(())
    }

    async fn open(&self, workstreams: usize) -> Result<Vec<(String, GrpcEvents)>> {
        let mut out = Vec::with_capacity(workstreams);
        for _ in 0..workstreams {
            let id = self.create().await?;
            let events = self.subscribe(&id).await?;
            out.push((id, events));
        }
        Ok(out)
    }

    /// `turns` turns on each of `workstreams` workstreams at once: the send → first
    /// `content` samples (sorted) and the aggregate turns/s.
    pub async fn turns(
        &self,
        node: &Node,
        workstreams: usize,
        turns: usize,
    ) -> Result<(Vec<Duration>, f64)> {
        let opened = self.open(workstreams).await?;
        let ids: Vec<String> = opened.iter().map(|(id, _)| id.clone()).collect();
        let started = Instant::now();
        let tasks: Vec<_> = opened
            .into_iter()
            .map(|(id, mut events)| {
                let client = self.clone();
                tokio::spawn(async move {
                    let mut samples = Vec::with_capacity(turns);
                    for n in 0..turns {
                        if n > 0 && n % CLEAR_EVERY == 0 {
                            client.clear(&id).await?;
                        }
                        let sent = Instant::now();
                        client.send(&id).await?;
                        events.until("content").await?;
                        samples.push(sent.elapsed());
                        events.until("turn_complete").await?;
                    }
                    Ok::<_, anyhow::Error>(samples)
                })
            })
            .collect();
        let mut all = Vec::with_capacity(workstreams * turns);
        for t in tasks {
            all.extend(t.await??);
        }
        let rate = (workstreams * turns) as f64 / started.elapsed().as_secs_f64();
        close_all(node, &ids);
        all.sort();
        Ok((all, rate))
    }
}

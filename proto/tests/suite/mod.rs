mod api;
mod fixtures;
mod keys;
mod mq;
mod props;
mod relay;
mod sse;
mod tolerance;

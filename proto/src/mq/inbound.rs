//! Inbound MQ messages: client → bridge, carried on Redis lists
//! (cluster spec §1.2).

use crate::ids::{new_correlation_id, now_timestamp};
use crate::tolerant::{tagged_enum, variant_from, wire_struct};

/// Fields shared by every inbound message (cluster spec §1.2): wire order
/// `type, correlation_id, timestamp, <own fields>`.
pub trait InboundEnvelope {
    /// The producer's id for this request; acks and `turn_complete` echo it.
    fn correlation_id(&self) -> &str;
    /// Replaces the correlation id.
    fn set_correlation_id(&mut self, id: String);
    /// Unix epoch seconds when the message was built.
    fn timestamp(&self) -> f64;
    /// Replaces the timestamp.
    fn set_timestamp(&mut self, ts: f64);
    /// The producer's W3C `traceparent`, if it sent one.
    fn traceparent(&self) -> Option<&str>;
    /// Replaces the `traceparent`.
    fn set_traceparent(&mut self, traceparent: Option<String>);
}

/// Declares one inbound payload: prepends the common fields (a fresh
/// `correlation_id`, `timestamp` = now) and implements [`InboundEnvelope`].
macro_rules! inbound_struct {
    (
        $(#[$smeta:meta])*
        pub struct $name:ident { $($rest:tt)* }
    ) => {
        wire_struct! {
            $(#[$smeta])*
            pub struct $name {
                /// 12 hex digits; generated when absent or empty (§1.1).
                pub correlation_id: String = new_correlation_id(),
                /// Unix epoch seconds; now when absent (§1.1).
                pub timestamp: f64 = now_timestamp(),
                /// W3C trace context of the producer's span
                /// (`00-<trace id>-<span id>-<flags>`): the bridge's handling and the
                /// node's turn join that trace. Omitted when absent.
                #[serde(skip_serializing_if = "Option::is_none")]
                pub traceparent: Option<String> = None,
                $($rest)*
            }
        }

        impl InboundEnvelope for $name {
            fn correlation_id(&self) -> &str {
                &self.correlation_id
            }
            fn set_correlation_id(&mut self, id: String) {
                self.correlation_id = id;
            }
            fn timestamp(&self) -> f64 {
                self.timestamp
            }
            fn set_timestamp(&mut self, ts: f64) {
                self.timestamp = ts;
            }
            fn traceparent(&self) -> Option<&str> {
                self.traceparent.as_deref()
            }
            fn set_traceparent(&mut self, traceparent: Option<String>) {
                self.traceparent = traceparent;
            }
        }
    };
}

inbound_struct! {
    /// `send`: start a turn in a workstream, creating one first when `ws_id`
    /// is empty (cluster spec §1.2, §3.5). Routed by `target_node`, then owner.
    pub struct SendMessage {
        pub ws_id: String = String::new(),
        pub message: String = String::new(),
        /// Blanket auto-approve for the workstream (sticky in the original).
        pub auto_approve: bool = false,
        /// When non-empty, replaces the workstream's auto-approved tool set.
        pub auto_approve_tools: Vec<String> = Vec::new(),
        /// Name for the workstream created when `ws_id` is empty.
        pub name: String = String::new(),
        pub target_node: String = String::new(),
    }
}

inbound_struct! {
    /// `approve`: the answer to an `approval_request`; normally pushed straight
    /// to `{p}:resp:{request_id}` (cluster spec §1.2, §3.7). Local only.
    pub struct ApproveMessage {
        pub ws_id: String = String::new(),
        /// The `correlation_id` of the `approval_request` being answered.
        pub request_id: String = String::new(),
        /// Defaults to `true` when absent.
        pub approved: bool = true,
        /// `null` on the wire when absent.
        pub feedback: Option<String> = None,
        /// Approve these tools for the rest of the workstream.
        pub always: bool = false,
    }
}

inbound_struct! {
    /// `plan_feedback`: the answer to a `plan_review` (cluster spec §1.2, §3.7).
    /// Local only.
    pub struct PlanFeedbackMessage {
        pub ws_id: String = String::new(),
        pub request_id: String = String::new(),
        /// `""` approves the plan; other text is revision feedback; `"reject"` rejects.
        pub feedback: String = String::new(),
    }
}

inbound_struct! {
    /// `command`: a slash command such as `/clear` (cluster spec §1.2).
    /// Routed to the owner only.
    pub struct CommandMessage {
        pub ws_id: String = String::new(),
        pub command: String = String::new(),
    }
}

inbound_struct! {
    /// `create_workstream` (cluster spec §1.2, §3.5). Routed by `target_node`
    /// only; it has no `ws_id`.
    pub struct CreateWorkstreamMessage {
        pub name: String = String::new(),
        pub auto_approve: bool = false,
        pub auto_approve_tools: Vec<String> = Vec::new(),
        pub target_node: String = String::new(),
        /// Model alias; `""` = the node's default.
        pub model: String = String::new(),
        /// Sent as the first `send` when the create did not resume.
        pub initial_message: String = String::new(),
        /// Resume this (alias | id | id prefix) instead of starting empty.
        pub resume_ws: String = String::new(),
        /// Attributed user; the node trusts it from bridge/console tokens only.
        pub user_id: String = String::new(),
        pub skill: String = String::new(),
    }
}

inbound_struct! {
    /// `close_workstream` (cluster spec §1.2). Routed to the owner only.
    pub struct CloseWorkstreamMessage {
        pub ws_id: String = String::new(),
    }
}

inbound_struct! {
    /// `list_workstreams`: answered with `ws_list` on the global channel
    /// (cluster spec §1.2, §3.5). Local only.
    pub struct ListWorkstreamsMessage {}
}

inbound_struct! {
    /// `health`: answered with `health_response` on the global channel
    /// (cluster spec §1.2, §3.5). Local only.
    pub struct HealthMessage {}
}

inbound_struct! {
    /// `list_nodes`: answered with `node_list` on the global channel
    /// (cluster spec §1.2, §3.5). Local only.
    pub struct ListNodesMessage {}
}

inbound_struct! {
    /// `cancel`: stop the current generation (cluster spec §1.2). Routed to
    /// the owner only.
    pub struct CancelMessage {
        pub ws_id: String = String::new(),
    }
}

tagged_enum! {
    /// Every inbound MQ message (cluster spec §1.2), discriminated by `type`.
    ///
    /// Decoding follows §1.1: unknown keys are ignored, missing keys take
    /// their defaults, an absent or empty `correlation_id` gets a fresh one,
    /// an unknown `type` is [`crate::ProtoError::UnknownType`].
    pub enum InboundMessage {
        Send(SendMessage) = "send",
        Approve(ApproveMessage) = "approve",
        PlanFeedback(PlanFeedbackMessage) = "plan_feedback",
        Command(CommandMessage) = "command",
        CreateWorkstream(CreateWorkstreamMessage) = "create_workstream",
        CloseWorkstream(CloseWorkstreamMessage) = "close_workstream",
        ListWorkstreams(ListWorkstreamsMessage) = "list_workstreams",
        Health(HealthMessage) = "health",
        ListNodes(ListNodesMessage) = "list_nodes",
        Cancel(CancelMessage) = "cancel",
    }
    envelope InboundEnvelope
}

impl InboundMessage {
    fn after_decode(&mut self) {
        if self.correlation_id().is_empty() {
            self.envelope_mut().set_correlation_id(new_correlation_id());
        }
    }

    /// The producer's correlation id (never empty after decoding).
    pub fn correlation_id(&self) -> &str {
        self.envelope().correlation_id()
    }

    /// Unix epoch seconds when the message was built.
    pub fn timestamp(&self) -> f64 {
        self.envelope().timestamp()
    }

    /// The producer's W3C `traceparent`; `None` when absent or empty.
    pub fn traceparent(&self) -> Option<&str> {
        self.envelope()
            .traceparent()
            .filter(|t| !t.trim().is_empty())
    }

    /// The addressed workstream; `""` when empty or when the type has no
    /// `ws_id` (`create_workstream`, `list_*`, `health`).
    pub fn ws_id(&self) -> &str {
        match self {
            Self::Send(m) => &m.ws_id,
            Self::Approve(m) => &m.ws_id,
            Self::PlanFeedback(m) => &m.ws_id,
            Self::Command(m) => &m.ws_id,
            Self::CloseWorkstream(m) => &m.ws_id,
            Self::Cancel(m) => &m.ws_id,
            Self::CreateWorkstream(_)
            | Self::ListWorkstreams(_)
            | Self::Health(_)
            | Self::ListNodes(_) => "",
        }
    }

    /// The directed node; `""` unless a `send`/`create_workstream` names one.
    pub fn target_node(&self) -> &str {
        match self {
            Self::Send(m) => &m.target_node,
            Self::CreateWorkstream(m) => &m.target_node,
            _ => "",
        }
    }

    /// The approval / plan request answered by `approve` / `plan_feedback`;
    /// `None` for other types.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            Self::Approve(m) => Some(&m.request_id),
            Self::PlanFeedback(m) => Some(&m.request_id),
            _ => None,
        }
    }

    /// Whether a bridge may forward this type to another node (cluster spec
    /// §1.2 "routed?" column, §3.4): `send`, `command`, `create_workstream`,
    /// `close_workstream`, `cancel`.
    pub fn is_routable(&self) -> bool {
        matches!(
            self,
            Self::Send(_)
                | Self::Command(_)
                | Self::CreateWorkstream(_)
                | Self::CloseWorkstream(_)
                | Self::Cancel(_)
        )
    }
}

variant_from! {
    InboundMessage:
    Send(SendMessage),
    Approve(ApproveMessage),
    PlanFeedback(PlanFeedbackMessage),
    Command(CommandMessage),
    CreateWorkstream(CreateWorkstreamMessage),
    CloseWorkstream(CloseWorkstreamMessage),
    ListWorkstreams(ListWorkstreamsMessage),
    Health(HealthMessage),
    ListNodes(ListNodesMessage),
    Cancel(CancelMessage),
}

//! Child processes of tools (`bash`, watch polls): killing a command's whole process group.

/// Kills a process group when dropped (a command that timed out, was cancelled or was
/// abandoned), unless disarmed.
pub(crate) struct GroupKill {
    pgid: Option<rustix::process::Pid>,
}

impl GroupKill {
    pub(crate) fn new(pid: Option<u32>) -> Self {
        let pgid = pid
            .and_then(|p| i32::try_from(p).ok())
            .filter(|p| *p > 1)
            .and_then(rustix::process::Pid::from_raw);
        Self { pgid }
    }

    pub(crate) fn kill(&self) {
        if let Some(pgid) = self.pgid {
            // ESRCH (the group is already gone) is the normal case after a clean exit.
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }

    pub(crate) fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.kill();
    }
}

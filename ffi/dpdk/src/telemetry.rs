//! Telemetry commands served by DPDK's telemetry socket (`dpdk-telemetry.py -f <prefix>`): a
//! Rust closure answers a command such as `/barrier/stats` with a dictionary. DPDK's callback
//! has no user pointer, so one C trampoline looks the closure up by command name.

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use dpdk_sys as sys;

use crate::eal::Eal;
use crate::error::{check, DpdkError};

/// One value in a telemetry reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TelemetryValue {
    /// An unsigned counter.
    U64(u64),
    /// A string (at most 127 bytes; longer ones are cut).
    Str(String),
}

type Handler = Arc<dyn Fn(Option<&str>) -> Vec<(String, TelemetryValue)> + Send + Sync>;

static HANDLERS: Mutex<BTreeMap<String, Handler>> = Mutex::new(BTreeMap::new());

/// Longest command DPDK accepts (`MAX_CMD_LEN` in telemetry.c is 56, NUL included).
const MAX_CMD_LEN: usize = 55;

/// Registers `cmd` (e.g. `/barrier/stats`: `/` then letters, digits, `_`, `/`) answering with
/// the dictionary `f` returns; `f` gets the parameters after the comma, if any. `f` runs on
/// DPDK's telemetry thread, not an lcore. Registration lasts for the process.
pub fn register_dict<F>(_eal: &Eal, cmd: &str, help: &str, f: F) -> Result<(), DpdkError>
where
    F: Fn(Option<&str>) -> Vec<(String, TelemetryValue)> + Send + Sync + 'static,
{
    const OP: &str = "rte_telemetry_register_cmd";
    if !cmd.starts_with('/')
        || cmd.len() > MAX_CMD_LEN
        || !cmd
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '/')
    {
        return Err(DpdkError::invalid(
            OP,
            format!("{cmd:?}: want '/' then [A-Za-z0-9_/], at most {MAX_CMD_LEN} bytes"),
        ));
    }
    let c_cmd = CString::new(cmd).map_err(|_| DpdkError::invalid(OP, "command contains NUL"))?;
    let c_help = CString::new(help).map_err(|_| DpdkError::invalid(OP, "help contains NUL"))?;
    let mut handlers = HANDLERS.lock().unwrap_or_else(|p| p.into_inner());
    if handlers.contains_key(cmd) {
        return Err(DpdkError::invalid(
            OP,
            format!("{cmd} is already registered"),
        ));
    }
    // SAFETY: both strings are valid C strings (DPDK copies them into its table); the trampoline
    // matches telemetry_cb and never unwinds.
    check(OP, unsafe {
        sys::rte_telemetry_register_cmd(c_cmd.as_ptr(), Some(trampoline), c_help.as_ptr())
    })?;
    handlers.insert(cmd.to_string(), Arc::new(f));
    Ok(())
}

unsafe extern "C" fn trampoline(
    cmd: *const c_char,
    params: *const c_char,
    d: *mut sys::rte_tel_data,
) -> c_int {
    let run = AssertUnwindSafe(|| -> Option<Vec<(String, TelemetryValue)>> {
        // SAFETY: DPDK passes the NUL-terminated command it matched.
        let cmd = unsafe { CStr::from_ptr(cmd) }.to_str().ok()?;
        let params = if params.is_null() {
            None
        } else {
            // SAFETY: non-NULL params is a NUL-terminated string owned by DPDK for the call.
            Some(
                unsafe { CStr::from_ptr(params) }
                    .to_string_lossy()
                    .into_owned(),
            )
            .filter(|p| !p.is_empty())
        };
        let handler = HANDLERS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(cmd)?
            .clone();
        Some(handler(params.as_deref()))
    });
    let Ok(Some(entries)) = catch_unwind(run) else {
        return -1;
    };
    // SAFETY: `d` is the reply object DPDK handed us for this call.
    unsafe { sys::rte_tel_data_start_dict(d) };
    for (name, value) in entries
        .into_iter()
        .take(sys::RTE_TEL_MAX_DICT_ENTRIES as usize)
    {
        let mut name = name;
        // Cut at a character boundary: String::truncate panics inside a character, and a panic
        // here (outside catch_unwind, in an extern "C" callback) would abort the process.
        let mut cut = (sys::RTE_TEL_MAX_STRING_LEN as usize - 1).min(name.len());
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name.truncate(cut);
        let Ok(c_name) = CString::new(name) else {
            continue;
        };
        // SAFETY: `d` is a dict started above; name and value are valid C strings that DPDK
        // copies (it truncates over-long ones).
        unsafe {
            match value {
                TelemetryValue::U64(v) => {
                    sys::rte_tel_data_add_dict_u64(d, c_name.as_ptr(), v);
                }
                TelemetryValue::Str(s) => {
                    let c = CString::new(s.replace('\0', "")).unwrap_or_default();
                    sys::rte_tel_data_add_dict_string(d, c_name.as_ptr(), c.as_ptr());
                }
            }
        }
    }
    0
}

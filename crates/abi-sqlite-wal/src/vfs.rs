//! The VFS: SQLite's platform VFS, with WAL files opened behind methods that
//! hold contiguous writes (`coalesce`) until the file is synced, read, sized,
//! truncated or closed. Every other file is the platform's, untouched.

use std::ffi::{CStr, c_int, c_void};
use std::ptr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use rusqlite::ffi;

use crate::WalWrites;
use crate::coalesce::Held;

/// The name connections open the VFS by.
pub const VFS_NAME: &str = "abi-wal";
const NAME: &CStr = c"abi-wal";

/// The platform's VFS (SQLite's default when registered), which opens every
/// file.
static PLATFORM: AtomicPtr<ffi::sqlite3_vfs> = AtomicPtr::new(ptr::null_mut());
static REGISTERED: OnceLock<Result<(), c_int>> = OnceLock::new();
static ASKED: AtomicU64 = AtomicU64::new(0);
static WRITTEN: AtomicU64 = AtomicU64::new(0);

/// SQLite refused to register the VFS.
#[derive(Debug, thiserror::Error)]
#[error("SQLite did not register the {VFS_NAME} VFS (result code {code})")]
pub struct RegisterError {
    /// SQLite's result code.
    pub code: c_int,
}

/// Registers the VFS with SQLite once per process (not as the default) and
/// returns the name to open connections with
/// (`Connection::open_with_flags_and_vfs`). Later calls return the first
/// call's outcome.
///
/// # Errors
///
/// [`RegisterError`] when SQLite has no default VFS or refuses this one.
pub fn register() -> Result<&'static str, RegisterError> {
    // SAFETY: `install` is called once, through the `OnceLock`.
    match REGISTERED.get_or_init(|| unsafe { install() }) {
        Ok(()) => Ok(VFS_NAME),
        Err(code) => Err(RegisterError { code: *code }),
    }
}

/// The WAL writes this process's connections made through the VFS so far.
pub fn wal_writes() -> WalWrites {
    WalWrites {
        asked: ASKED.load(Ordering::Relaxed),
        written: WRITTEN.load(Ordering::Relaxed),
    }
}

/// A WAL file as this VFS opens it: SQLite's `sqlite3_file` header first, as
/// SQLite requires, then the platform's file it wraps, which lives in the same
/// allocation at [`PLATFORM_FILE_OFFSET`].
#[repr(C)]
struct WalFile {
    base: ffi::sqlite3_file,
    platform: *mut ffi::sqlite3_file,
    held: Held,
}

/// Where the platform's file starts in the allocation SQLite makes for a file
/// of this VFS (`szOsFile` bytes, 8-byte aligned).
const PLATFORM_FILE_OFFSET: usize = std::mem::size_of::<WalFile>().next_multiple_of(16);

/// # Safety
///
/// Called once (see [`register`]), before any connection opens this VFS.
unsafe fn install() -> Result<(), c_int> {
    // SAFETY: a null name asks SQLite for its default VFS; SQLite initializes
    // itself first.
    let platform = unsafe { ffi::sqlite3_vfs_find(ptr::null()) };
    if platform.is_null() {
        return Err(ffi::SQLITE_ERROR);
    }
    PLATFORM.store(platform, Ordering::Release);
    // SAFETY: `platform` is SQLite's registered default VFS, which lives as
    // long as the process; copying it keeps its functions and their
    // application data (the platform's own `xOpen`, the only one reading it,
    // is called with the platform's struct below).
    let mut vfs = unsafe { *platform };
    let Ok(offset) = c_int::try_from(PLATFORM_FILE_OFFSET) else {
        return Err(ffi::SQLITE_ERROR);
    };
    vfs.szOsFile += offset;
    vfs.zName = NAME.as_ptr();
    vfs.pNext = ptr::null_mut();
    vfs.xOpen = Some(open);
    // SQLite keeps the pointer for the life of the process.
    let vfs = Box::leak(Box::new(vfs));
    // SAFETY: `vfs` is a complete VFS that outlives every connection.
    let code = unsafe { ffi::sqlite3_vfs_register(vfs, 0) };
    if code == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(code)
    }
}

/// Opens a file: a WAL file wrapped, anything else as the platform opens it.
unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let platform = PLATFORM.load(Ordering::Acquire);
    // SAFETY: `register` stored the platform's VFS before registering this
    // one, so any call here sees it.
    let Some(platform_open) = (unsafe { (*platform).xOpen }) else {
        return ffi::SQLITE_CANTOPEN;
    };
    if flags & ffi::SQLITE_OPEN_WAL == 0 {
        // SAFETY: SQLite gave `file` our `szOsFile` bytes, more than the
        // platform's file needs.
        return unsafe { platform_open(platform, name, file, flags, out_flags) };
    }
    // SAFETY: the allocation holds `PLATFORM_FILE_OFFSET` bytes and then the
    // platform's `szOsFile`.
    let inner = unsafe { file.cast::<u8>().add(PLATFORM_FILE_OFFSET) }.cast::<ffi::sqlite3_file>();
    // SAFETY: as above; no methods until the open succeeded, so SQLite does
    // not close a file that failed to open.
    unsafe { (*file).pMethods = ptr::null() };
    // SAFETY: `inner` is the platform's share of the allocation.
    let code = unsafe { platform_open(platform, name, inner, flags, out_flags) };
    if code != ffi::SQLITE_OK {
        return code;
    }
    // SAFETY: `file` starts an allocation of at least `size_of::<WalFile>()`
    // bytes, 8-byte aligned like `WalFile`, that no Rust value owns yet; the
    // platform's file lies after it.
    unsafe {
        file.cast::<WalFile>().write(WalFile {
            base: ffi::sqlite3_file {
                pMethods: &WAL_METHODS,
            },
            platform: inner,
            held: Held::default(),
        });
    }
    ffi::SQLITE_OK
}

/// The methods of a WAL file. Version 1: SQLite maps no shared memory and
/// fetches no pages through a WAL file.
static WAL_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 1,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: None,
    xShmLock: None,
    xShmBarrier: None,
    xShmUnmap: None,
    xFetch: None,
    xUnfetch: None,
};

/// The wrapped file and the platform's methods for it.
///
/// # Safety
///
/// `file` is a WAL file `open` made and SQLite has not closed; SQLite calls a
/// file's methods from one thread at a time.
unsafe fn parts<'a>(
    file: *mut ffi::sqlite3_file,
) -> (&'a mut WalFile, &'a ffi::sqlite3_io_methods) {
    // SAFETY: per the contract, `file` holds a live `WalFile` no one else
    // borrows now, whose platform file was opened with methods.
    unsafe {
        let wal = &mut *file.cast::<WalFile>();
        let methods = &*(*wal.platform).pMethods;
        (wal, methods)
    }
}

/// Writes the held bytes, if any, to the platform's file; forgets them
/// either way.
fn flush(wal: &mut WalFile, methods: &ffi::sqlite3_io_methods) -> c_int {
    let Some((offset, bytes)) = wal.held.pending() else {
        return ffi::SQLITE_OK;
    };
    let (Some(platform_write), Ok(len)) = (methods.xWrite, c_int::try_from(bytes.len())) else {
        wal.held.clear();
        return ffi::SQLITE_IOERR_WRITE;
    };
    // SAFETY: `platform` is the open platform file; `bytes` is `len` bytes.
    let code = unsafe { platform_write(wal.platform, bytes.as_ptr().cast(), len, offset) };
    WRITTEN.fetch_add(1, Ordering::Relaxed);
    wal.held.clear();
    code
}

/// Writes what is held, then calls the platform's method.
macro_rules! flushed_then {
    ($file:ident, $method:ident ( $($arg:expr),* )) => {{
        // SAFETY: SQLite calls this method on a WAL file `open` made.
        let (wal, methods) = unsafe { parts($file) };
        let code = flush(wal, methods);
        if code != ffi::SQLITE_OK {
            return code;
        }
        match methods.$method {
            // SAFETY: the platform's own method on its open file.
            Some(method) => unsafe { method(wal.platform $(, $arg)*) },
            None => ffi::SQLITE_IOERR,
        }
    }};
}

/// Calls the platform's method, leaving what is held.
macro_rules! forwarded {
    ($file:ident, $method:ident ( $($arg:expr),* ), $missing:expr) => {{
        // SAFETY: SQLite calls this method on a WAL file `open` made.
        let (wal, methods) = unsafe { parts($file) };
        match methods.$method {
            // SAFETY: the platform's own method on its open file.
            Some(method) => unsafe { method(wal.platform $(, $arg)*) },
            None => $missing,
        }
    }};
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite closes a file `open` made, once.
    let (wal, methods) = unsafe { parts(file) };
    let flushed = flush(wal, methods);
    let closed = match methods.xClose {
        // SAFETY: the platform's own close of its open file.
        Some(close) => unsafe { close(wal.platform) },
        None => ffi::SQLITE_OK,
    };
    // SAFETY: the file is closed; its `WalFile` is dropped once, here, and
    // SQLite frees the allocation afterwards.
    unsafe { ptr::drop_in_place(file.cast::<WalFile>()) };
    if flushed == ffi::SQLITE_OK {
        closed
    } else {
        flushed
    }
}

unsafe extern "C" fn read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    flushed_then!(file, xRead(buf, amount, offset))
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    ASKED.fetch_add(1, Ordering::Relaxed);
    // SAFETY: SQLite calls this method on a WAL file `open` made.
    let (wal, methods) = unsafe { parts(file) };
    let Ok(len) = usize::try_from(amount) else {
        return ffi::SQLITE_IOERR_WRITE;
    };
    let plan = wal.held.plan(offset, len);
    if plan.flush_first {
        let code = flush(wal, methods);
        if code != ffi::SQLITE_OK {
            return code;
        }
    }
    if plan.hold {
        // SAFETY: SQLite passes `amount` readable bytes at `buf`.
        let data = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) };
        wal.held.hold(offset, data);
        return ffi::SQLITE_OK;
    }
    WRITTEN.fetch_add(1, Ordering::Relaxed);
    match methods.xWrite {
        // SAFETY: the platform's own write, with SQLite's arguments.
        Some(platform_write) => unsafe { platform_write(wal.platform, buf, amount, offset) },
        None => ffi::SQLITE_IOERR_WRITE,
    }
}

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: ffi::sqlite3_int64) -> c_int {
    flushed_then!(file, xTruncate(size))
}

unsafe extern "C" fn sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    flushed_then!(file, xSync(flags))
}

unsafe extern "C" fn file_size(
    file: *mut ffi::sqlite3_file,
    size: *mut ffi::sqlite3_int64,
) -> c_int {
    flushed_then!(file, xFileSize(size))
}

unsafe extern "C" fn file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    flushed_then!(file, xFileControl(op, arg))
}

unsafe extern "C" fn lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    forwarded!(file, xLock(level), ffi::SQLITE_OK)
}

unsafe extern "C" fn unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    forwarded!(file, xUnlock(level), ffi::SQLITE_OK)
}

unsafe extern "C" fn check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    forwarded!(file, xCheckReservedLock(out), ffi::SQLITE_IOERR)
}

unsafe extern "C" fn sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    forwarded!(file, xSectorSize(), 4096)
}

unsafe extern "C" fn device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    forwarded!(file, xDeviceCharacteristics(), 0)
}

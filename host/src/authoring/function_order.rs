//! Where a core module's functions sit in its code, and so in the code
//! wasmtime compiles from it (functions keep their order, by index).
//!
//! Why it matters: the operator maps a module's compiled code from its
//! `.cwasm` file, and the kernel maps 64 KiB around every page a call
//! faults in. A reconcile may run a few hundred of a Rust module's
//! thousands of functions, spread over the whole code, so after a few
//! hundred parents almost all of the code is resident. Laid out first and
//! together, the functions a reconcile runs fault in a fraction of it.
//!
//! Two steps, both on the core module before `componentize` wraps it:
//! [`instrument::instrument_entries`] makes a copy that records, per
//! function, when it first ran (a profile run reads that out), and
//! [`reorder::order_functions`] moves the functions so named to the front,
//! in the order given. What both read of a module is here.

pub mod instrument;
pub mod reorder;

use std::collections::HashMap;

use wasm_encoder::reencode::Error as ReencodeError;
use wasmparser::{Name, Parser, Payload, TypeRef};

#[derive(Debug, thiserror::Error)]
pub enum FunctionOrderError {
    #[error("the core module is not valid WebAssembly: {0}")]
    InvalidInput(wasmparser::BinaryReaderError),
    #[error("the core module does not parse: {0}")]
    Parse(#[from] wasmparser::BinaryReaderError),
    #[error("re-encoding the core module: {0}")]
    Reencode(String),
    #[error("the core module has no global section to add the entry marks to")]
    NoGlobals,
    #[error("the re-encoded module does not validate: {0}")]
    Invalid(wasmparser::BinaryReaderError),
}

impl From<ReencodeError<std::convert::Infallible>> for FunctionOrderError {
    fn from(error: ReencodeError<std::convert::Infallible>) -> Self {
        FunctionOrderError::Reencode(error.to_string())
    }
}

/// What a core module's function index space holds.
struct Functions {
    /// Imported functions come first in the index space and never move.
    imported: u32,
    /// Imported globals, likewise, before the module's own.
    imported_globals: u32,
    /// The name-section name of each defined function, by position.
    names: Vec<Option<String>>,
}

fn functions(core: &[u8]) -> Result<Functions, FunctionOrderError> {
    let mut imported = 0;
    let mut imported_globals = 0;
    let mut defined = 0usize;
    let mut named = HashMap::new();
    for payload in Parser::new(0).parse_all(core) {
        match payload? {
            Payload::ImportSection(section) => {
                for import in section.into_imports() {
                    match import?.ty {
                        TypeRef::Func(_) => imported += 1,
                        TypeRef::Global(_) => imported_globals += 1,
                        _ => {}
                    }
                }
            }
            Payload::FunctionSection(section) => defined = section.count() as usize,
            Payload::CustomSection(section) => {
                if let wasmparser::KnownCustom::Name(reader) = section.as_known() {
                    for name in reader {
                        if let Name::Function(map) = name? {
                            for naming in map {
                                let naming = naming?;
                                named.insert(naming.index, naming.name.to_owned());
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let names = (0..defined as u32).map(|position| named.remove(&(imported + position))).collect();
    Ok(Functions { imported, imported_globals, names })
}

/// The name of each defined function (None: the name section has none), by
/// position among the defined functions: what
/// [`ENTRY_EXPORT_PREFIX`](instrument::ENTRY_EXPORT_PREFIX)'s numbers refer to.
pub fn defined_function_names(core: &[u8]) -> Result<Vec<Option<String>>, FunctionOrderError> {
    Ok(functions(core)?.names)
}

/// The names in a function-order file: one per line; blank lines and
/// lines starting with `#` are skipped.
pub fn function_list(text: &str) -> Vec<String> {
    text.lines().map(str::trim).filter(|line| !line.is_empty() && !line.starts_with('#')).map(str::to_owned).collect()
}

fn validate(module: &[u8]) -> Result<(), wasmparser::BinaryReaderError> {
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all()).validate_all(module).map(|_| ())
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use wasm_encoder::{
        CodeSection, ConstExpr, ElementSection, Elements, ExportKind, ExportSection, Function, FunctionSection,
        GlobalSection, GlobalType, Instruction, Module, NameMap, NameSection, RefType, TableSection, TableType,
        TypeSection, ValType,
    };
    use wasmtime::{Engine, Instance, Store};

    use super::instrument::instrument_entries;
    use super::reorder::order_functions;
    use super::*;

    /// `one` returns 1, `twenty` 20, `unused` 300; `sum` (exported as run)
    /// calls `one`, `twenty` through the table and `twenty` again: 41.
    pub(super) fn module() -> Vec<u8> {
        let mut types = TypeSection::new();
        types.ty().function([], [ValType::I32]);
        let mut functions = FunctionSection::new();
        for _ in 0..4 {
            functions.function(0);
        }
        let mut tables = TableSection::new();
        tables.table(TableType {
            element_type: RefType::FUNCREF,
            minimum: 1,
            maximum: Some(1),
            table64: false,
            shared: false,
        });
        let mut globals = GlobalSection::new();
        globals.global(GlobalType { val_type: ValType::I32, mutable: true, shared: false }, &ConstExpr::i32_const(0));
        let mut exports = ExportSection::new();
        exports.export("run", ExportKind::Func, 3);
        let mut elements = ElementSection::new();
        elements.active(Some(0), &ConstExpr::i32_const(0), Elements::Functions(Cow::Borrowed(&[1])));
        let mut code = CodeSection::new();
        for value in [1, 20, 300] {
            let mut constant = Function::new([]);
            constant.instruction(&Instruction::I32Const(value)).instruction(&Instruction::End);
            code.function(&constant);
        }
        let mut sum = Function::new([]);
        sum.instruction(&Instruction::Call(0))
            .instruction(&Instruction::I32Const(0))
            .instruction(&Instruction::CallIndirect { type_index: 0, table_index: 0 })
            .instruction(&Instruction::I32Add)
            .instruction(&Instruction::Call(1))
            .instruction(&Instruction::I32Add)
            .instruction(&Instruction::End);
        code.function(&sum);
        let mut names = NameMap::new();
        for (index, name) in ["one", "twenty", "unused", "sum"].into_iter().enumerate() {
            names.append(index as u32, name);
        }
        let mut name_section = NameSection::new();
        name_section.functions(&names);
        let mut module = Module::new();
        module
            .section(&types)
            .section(&functions)
            .section(&tables)
            .section(&globals)
            .section(&exports)
            .section(&elements)
            .section(&code)
            .section(&name_section);
        module.finish()
    }

    pub(super) fn run(module: &[u8]) -> i32 {
        let engine = Engine::default();
        let module = wasmtime::Module::new(&engine, module).expect("compiles");
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).expect("instantiates");
        let run = instance.get_typed_func::<(), i32>(&mut store, "run").expect("exports run");
        run.call(&mut store, ()).expect("runs")
    }

    pub(super) fn names(module: &[u8]) -> Vec<String> {
        defined_function_names(module).expect("parses").into_iter().map(|name| name.unwrap_or_default()).collect()
    }

    #[test]
    fn names_are_read_by_position_among_the_defined_functions_and_lists_skip_comments() {
        assert_eq!(names(&module()), ["one", "twenty", "unused", "sum"]);
        assert_eq!(function_list("# first\n sum \n\ntwenty\n"), ["sum", "twenty"]);
    }

    #[test]
    fn bytes_that_are_not_a_valid_module_are_refused_with_what_is_wrong() {
        let error = order_functions(b"not wasm", &[]).expect_err("refused");
        assert!(error.to_string().starts_with("the core module is not valid WebAssembly"), "{error}");
        // A call to a function that does not exist: refused, not a panic.
        let mut module = module();
        let call_one = [0x10, 0x00];
        let at = module.windows(2).rposition(|w| w == call_one).expect("sum calls one");
        module[at + 1] = 0x63;
        let error = order_functions(&module, &["sum".to_owned()]).expect_err("refused");
        assert!(matches!(error, FunctionOrderError::InvalidInput(_)), "{error}");
        assert!(instrument_entries(&module).is_err(), "the profile copy is refused too");
    }
}

// The parsed form of a chat template: tokens from the lexer, then a tree of
// statements holding expressions. Every node keeps the byte offset of the
// token it starts at, so that errors name a line and column.
#pragma once

#include "chat/value.h"

#include <memory>
#include <string>
#include <vector>

namespace llmc::chat {

// ---- tokens ----------------------------------------------------------------

enum class TokenKind {
  Data,          // template text between tags, whitespace control applied
  VariableBegin, // {{
  VariableEnd,   // }}
  BlockBegin,    // {%
  BlockEnd,      // %}
  Name,
  String, // text holds the unescaped value
  Integer,
  Float,
  Operator, // text holds the operator: "+", "//", "(", ...
  End,
};

struct Token {
  TokenKind kind = TokenKind::End;
  std::string text;
  int64_t integer = 0;
  double real = 0.0;
  size_t offset = 0;
};

// Splits `source` (newlines already normalized to "\n", one trailing newline
// already dropped, as jinja2 does) with trim_blocks and lstrip_blocks.
// Throws RenderError with the offset of a malformed tag.
std::vector<Token> lexTemplate(const std::string &source);

// ---- expressions -------------------------------------------------------------

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Const,    // constant
    Name,     // name
    List,     // children: items
    Tuple,    // children: items
    Dict,     // children: key, value, key, value, ...
    Getattr,  // children[0].name
    Getitem,  // children[0][children[1]]
    Slice,    // children: start, stop, step (each may be null); only inside Getitem
    Call,     // children[0](children[1..], keywords)
    Filter,   // children[0] | name(children[1..], keywords); children[0] null in filter blocks
    Test,     // children[0] is name(children[1..], keywords)
    Neg,      // -children[0]
    Pos,      // +children[0]
    Not,      // not children[0]
    Binary,   // children[0] name children[1]: + - * / // % ** ~
    And,      // children[0] and children[1]
    Or,       // children[0] or children[1]
    Compare,  // children[0] ops[0] children[1] ops[1] children[2] ... (chained)
    CondExpr, // children[1] if children[0] else children[2] (may be null)
  };
  Kind kind;
  size_t offset = 0;
  std::string name;
  Value constant;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  ExprPtr starArgs, starKwargs; // f(*a, **k)
  std::vector<std::string> ops;

  Expr(Kind k, size_t at) : kind(k), offset(at) {}
};

// ---- statements --------------------------------------------------------------

// An assignment target: `x`, `ns.attr`, or `a, (b, c)`.
struct Target {
  enum class Kind { Name, Attribute, Tuple } kind = Kind::Name;
  std::string name;      // Name, and the namespace variable of Attribute
  std::string attribute; // Attribute
  std::vector<Target> items;
  size_t offset = 0;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroParam {
  std::string name;
  ExprPtr fallback; // default value, may be null
};

struct Stmt {
  enum class Kind {
    Data,        // text
    Print,       // {{ expr }}
    If,          // conditions[i] -> bodies[i]; elseBody
    For,         // for target in expr [if filter]: body, else elseBody
    Set,         // set target = expr
    SetBlock,    // set target [| filters] ... endset
    Macro,       // macro name(params) body
    CallBlock,   // call(params) expr: body is the caller
    FilterBlock, // filter filters: body
    With,        // with targets = values: body
    Scope,       // a body run in place: {% generation %} (transformers' extension)
    Break,
    Continue,
  };
  Kind kind;
  size_t offset = 0;
  std::string text;
  ExprPtr expr, filter;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  Body body, elseBody;
  Target target;
  std::vector<Target> targets; // With
  std::vector<ExprPtr> values; // With
  std::vector<ExprPtr> filters; // SetBlock, FilterBlock: Filter nodes whose operand is null
  std::vector<MacroParam> params;
  bool usesVarargs = false, usesKwargs = false, usesCaller = false;

  Stmt(Kind k, size_t at) : kind(k), offset(at) {}
};

// Parses the tokens into the template's top-level body. Throws RenderError.
Body parseTemplate(const std::vector<Token> &tokens);

// Whether a filter or test of this name exists (checked while parsing, as
// jinja2 checks them when it compiles a template).
bool filterExists(const std::string &name);
bool testExists(const std::string &name);

} // namespace llmc::chat

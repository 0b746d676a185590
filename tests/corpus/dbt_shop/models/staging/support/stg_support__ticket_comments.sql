select
    id as comment_id,
    ticket_id,
    author_id,
    author_role,
    is_public,
    created_at as commented_at
from {{ source('support', 'ticket_comments') }}
